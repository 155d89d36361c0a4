// gemv_pair (gemv_pair.h): the one-launch gate+up of MoE decode, or two gemv calls.
#include "cuda/gemv_pair.h"

#include <cstdint>
#include <cstdlib>

#include "cuda/act_q8.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_tuning.h"

namespace ft::cuda {
namespace {

const bool g_pair_off = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_PAIR");
  return e != nullptr && e[0] == '0';
}();

// Whether a and b are one product on two weight tensors that the pair kernel takes; every
// argument check of gemv() holds for them then.
bool pairs(const GemvArgs& a, const GemvArgs& b) {
  return !g_pair_off && gemv_detail::gemv_nvfp4_xmma_routed() && a.type == GgmlType::NVFP4 && b.type == GgmlType::NVFP4 && a.xq != nullptr &&
         a.xq == b.xq && reinterpret_cast<uintptr_t>(a.xq) % 16 == 0 && a.ids != nullptr && a.ids == b.ids &&
         a.slot_w == nullptr && b.slot_w == nullptr && a.k == b.k && a.k == 64 * kNvfp4XmmaBlocks &&
         a.rows == b.rows && a.rows > 0 && a.row_bytes == b.row_bytes && a.row_bytes >= row_bytes(a.type, a.k) &&
         a.expert_bytes == b.expert_bytes && a.x_div == b.x_div && a.x_div >= 1 && a.n_tok == b.n_tok &&
         a.n_tok >= 1 && a.n_tok <= 32767 && a.rows * a.n_tok < (int64_t{1} << 31) && a.ldy == b.ldy &&
         a.row_scale == b.row_scale && a.scale == b.scale && a.round == b.round && a.accumulate == b.accumulate &&
         a.bank == b.bank && a.w != nullptr && b.w != nullptr && a.y != nullptr && b.y != nullptr;
}

}  // namespace

void gemv_pair(const GemvArgs& a, const GemvArgs& b, cudaStream_t stream) {
  if (pairs(a, b)) {
    gemv_detail::Params p{};  // as gemv.cu's checked_params for a grouped integer-path call
    p.w = a.w;
    p.row_bytes = a.row_bytes;
    p.k = a.k;
    p.rows = a.rows;
    p.x = a.x;
    p.ldx = a.ldx;
    p.xq = static_cast<const uint8_t*>(a.xq);
    p.xq_row = act_q8_row_bytes(a.k);
    p.n_tok = 1;
    p.y = a.y;
    p.ldy = a.ldy;
    p.row_scale = a.row_scale;
    p.scale = a.scale;
    p.round = a.round;
    p.ids = a.ids;
    p.expert_bytes = a.expert_bytes;
    p.x_div = a.x_div;
    p.bank = a.bank;
    p.bank_col = a.bank_col;
    p.slot_w = nullptr;
    p.n_used = 1;
    p.accumulate = a.accumulate ? 1 : 0;
    if (gemv_detail::gemv_nvfp4_xmma_pair(p, b.w, b.y, b.bank_col, a.n_tok, kNvfp4XmmaWarps, kNvfp4XmmaStages,
                                          stream))
      return;
  }
  gemv(a, stream);
  gemv(b, stream);
}

}  // namespace ft::cuda
