// Prefill attention (causal flash attention over the cache, no workspace): one block per
// (query tile, KV head) walks the keys 0 .. pos + t with an online softmax. The f32 cache
// takes the SIMT kernel (attn_simt.cuh); bf16/f16 take the tensor-core kernel
// (attn_mma.cuh) unless attention_set_prefill_override(1) forces the SIMT one.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/attention.h"
#include "cuda/attn_args.cuh"
#include "cuda/attn_mma.cuh"
#include "cuda/attn_plan.cuh"
#include "cuda/attn_simt.cuh"
#include "cuda/check.h"

namespace ft::cuda {
namespace {

int g_prefill_override = 0;

}  // namespace

void attention_set_prefill_override(int mode) { g_prefill_override = mode; }

void attention_prefill(const AttnArgs& a, cudaStream_t s) {
  using namespace attn_detail;
  check_args(a, "cuda attention_prefill");
  if (a.n_tok == 0) return;
  const int64_t d = a.head_dim_k, group = a.n_head / a.n_head_kv;
  const int64_t row_blocks = ceil_div(a.n_tok * group, kRowsPerBlock);
  if (row_blocks >= (int64_t{1} << 31))
    fail_message("cuda attention_prefill: n_tok = " + std::to_string(a.n_tok) + " is too large for one call");

  SimtParams p{};
  p.q = a.q;
  p.ldq = a.ldq;
  p.k = a.k_cache;
  p.v = a.v_cache;
  p.kv_stride = a.n_head_kv * d;
  p.out = a.out;
  p.ldo = a.ldo;
  p.d_pos = a.d_pos;
  p.n_tok = a.n_tok;
  p.n_ctx = a.n_ctx;
  p.group = group;
  p.n_head = a.n_head;
  p.splits = 1;
  p.row_blocks = row_blocks;
  p.scale = a.scale;
  p.round = a.round;
  const bool mma = g_prefill_override == 0 && a.kv_type != KvType::kF32 && (d == 64 || d == 128);
  if (!mma) {
    dispatch_simt<false>(a.kv_type, d, p,
                         dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(a.n_head_kv), 1), s);
    return;
  }
  p.row_blocks = ceil_div(a.n_tok * group, kMmaRows);
  const dim3 grid(static_cast<unsigned>(p.row_blocks), static_cast<unsigned>(a.n_head_kv), 1);
  if (a.kv_type == KvType::kBF16) {
    if (d == 64) return launch_mma<__nv_bfloat16, 64>(p, grid, s);
    return launch_mma<__nv_bfloat16, 128>(p, grid, s);
  }
  if (d == 64) return launch_mma<__half, 64>(p, grid, s);
  launch_mma<__half, 128>(p, grid, s);
}

}  // namespace ft::cuda
