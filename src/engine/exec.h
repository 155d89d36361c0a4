// What every CPU block needs to run: the thread pool and the activation dtype.
//
// Activation dtype (--dtype): float32 keeps every activation in fp32 (the "exact math"
// mode compared with llama.cpp on an F32 twin). bfloat16 / float16 round what is stored
// between blocks (matmul outputs via the kernels' Round, norm outputs, GLU outputs, the KV
// cache) to that dtype; the residual stream stays fp32, as in llama.cpp. The NVFP4 `.scale`
// is applied in the matmul's fp32 epilogue, before that rounding.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/fp16.h"
#include "core/threadpool.h"
#include "quant/matmul.h"

namespace ft::engine {

enum class ActType { kF32, kBF16, kF16 };

std::optional<ActType> act_type_from_name(std::string_view s);  // "float32", "bfloat16", "float16"
std::string_view act_type_name(ActType t);

inline quant::Round round_of(ActType t) {
  switch (t) {
    case ActType::kBF16: return quant::Round::kBF16;
    case ActType::kF16: return quant::Round::kF16;
    default: return quant::Round::kNone;
  }
}

// Rounds v to the activation dtype (identity for fp32).
inline float round_act(ActType t, float v) {
  switch (t) {
    case ActType::kBF16: return bf16_to_f32(f32_to_bf16(v));
    case ActType::kF16: return f16_to_f32(f32_to_f16(v));
    default: return v;
  }
}
inline void round_act(ActType t, float* x, int64_t n) {
  if (t == ActType::kF32) return;
  for (int64_t i = 0; i < n; ++i) x[i] = round_act(t, x[i]);
}

struct Exec {
  ThreadPool* pool = nullptr;
  ActType act = ActType::kF32;
  // kQ8 (--dtype auto): activations of quantised-weight matmuls are rounded as llama.cpp's
  // CPU backend rounds them (quant/act_quant.h) and multiplied with integer kernels.
  quant::ActQuant act_quant = quant::ActQuant::kNone;
  quant::Round round() const { return round_of(act); }
};

}  // namespace ft::engine
