// gemm.h, grouped route (MoE prefill): one launch of the fused kernel (gemm_fused.cu) over
// all experts, the group table read on the device.
#include <string>

#include "cuda/check.h"
#include "cuda/gemm.h"
#include "cuda/gemm_fused.h"

namespace ft::cuda {

void gemm_grouped(Gemm& ctx, const GroupedGemmArgs& a, cudaStream_t s) {
  (void)ctx;  // no scratch needed yet: every CTA finds its tile from the offsets itself
  if (a.offsets == nullptr || a.n_expert < 1) {
    fail_message("gemm_grouped: expected an offsets table and n_expert >= 1 (n_expert=" +
                 std::to_string(a.n_expert) + ")");
  }
  if (a.n_expert > 1 && a.expert_bytes < a.g.row_bytes * a.g.rows) {
    fail_message("gemm_grouped: expert_bytes=" + std::to_string(a.expert_bytes) + " is less than rows * row_bytes");
  }
  if (a.expert_bytes % gemm_weight_align(a.g.type) != 0) {
    fail_message("gemm_grouped: expert_bytes=" + std::to_string(a.expert_bytes) + " must be a multiple of " +
                 std::to_string(gemm_weight_align(a.g.type)) + " for " + std::string(type_name(a.g.type)));
  }
  if (a.bank_col < 0 || a.bank_col > 3) fail_message("gemm_grouped: bank_col must be 0..3");
  GemmArgs g = a.g;
  g.prec = gemm_split_prec(g.type, g.prec);  // split requests on weights not exact in bf16 run at kF32
  gemm_detail::FusedParams p{g.type, g.w, g.row_bytes, g.k, g.rows, a.expert_bytes, g.x, g.ldx, g.n_tok, g.y,
                             g.ldy, g.row_scale, g.scale, g.round, g.accumulate, g.prec, a.n_expert, a.order,
                             a.offsets, a.x_div, a.bank, a.bank_col};
  gemm_detail::fused_gemm(p, s);
}

}  // namespace ft::cuda
