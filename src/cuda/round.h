// Rounding of kernel outputs to the activation dtype (--dtype): none (fp32), bfloat16 or
// float16, round-to-nearest-even, applied after the fp32 epilogue (scale, bias). Shared by
// every kernel family so that all of them round like engine::round_act on the CPU.
#pragma once

namespace ft::cuda {

enum class Round : int { kNone = 0, kBF16 = 1, kF16 = 2 };

}  // namespace ft::cuda
