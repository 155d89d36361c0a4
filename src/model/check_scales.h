// check_scales: the loader's rule for second-level scale tensors (shared/seed, spec
// nvfp4-scales.md §3 and §7). `<base>.scale` and `<base>.input_scale` are accepted only
//  - next to an NVFP4 `<base>.weight`, for a role llama.cpp loads a scale for
//    (attention/FFN/shared-expert/SSM projections, experts, output), F32, with shape {1}
//    for a dense tensor and {n_expert} for ffn_{gate,up,down}_exps; `.input_scale` is kept
//    but unused;
//  - or when the architecture owns the tensor (gemma4: ffn_gate_inp.scale, ffn_down_exps.scale).
// Everything else is refused with an error naming the tensor: scales next to non-NVFP4
// weights, scales without a weight (a tied NVFP4 output with output.scale among them),
// per-expert scales on a merged ffn_gate_up_exps tensor, non-F32 scales, wrong shapes.
#pragma once

#include <string>

#include "format/gguf.h"

namespace ft::model {

struct ScaleVerdict {
  bool ok = true;
  std::string message;  // the first problem found, naming the tensor
};

ScaleVerdict check_scales_verdict(const gguf::File& f);
// Throws ft::Error with the verdict's message when it is not ok.
void check_scales(const gguf::File& f);

}  // namespace ft::model
