// Random-weight gemma4 test models (shared/spec/arch/gemma4.md §6): sliding/global layers
// with their own head dims and KV head counts, V = K layers, layer output scales, optional
// KV sharing and per-layer input embeddings, and MoE layers (router input scale, experts
// beside the dense MLP, the router's per_expert_scale in ffn_down_exps.scale). Called by
// generate_model() for Arch::kGemma4; the same three files as the other archs:
//  * the model, with `.scale` tensors as llama.cpp's converter writes them: NVFP4
//    second-level scales, and ffn_down_exps.scale = per_expert_scale (times the NVFP4
//    scale_2 when the down experts are NVFP4: the converter's folding, nvfp4-scales.md §4);
//  * the F32 twin: every weight dequantised with all of those scales folded into its rows
//    (ffn_gate_inp.scale, the router input scale, stays: it is not a weight scale);
//  * the no-scale copy: NVFP4 second-level scales dropped, ffn_down_exps.scale left as the
//    bare per_expert_scale (a file that loads but computes the wrong function).
//
// Nearly every gemma4 projection feeds an RMS norm (Q/K/V norms, post-norms), so weight
// magnitudes are free: tensors get factors 10^U(-1, 1) and NVFP4 scales spread accordingly.
#pragma once

#include <string>

#include "testgen/model_gen.h"

namespace ft::testgen {

GenerateResult generate_gemma4(const ModelSpec& spec, const std::string& path, const std::string& twin_path,
                               const std::string& noscale_path, bool progress);

}  // namespace ft::testgen
