// Decode attention (split-K flash-decoding, attn_simt.cuh with kPartial) and its combine
// kernel; attention() picks this path or the prefill one (attention_prefill.cu).
//
// Graph capture: the grid is (row blocks, n_head_kv, splits) with splits fixed by n_ctx and
// the SM count; the chunk length is planned on the device from *d_pos (attn_plan.cuh
// decode_plan), chunks past the live length exit at once, and the combine kernel evaluates
// the same plan. No host sync, no allocation.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/attention.h"
#include "cuda/attn_args.cuh"
#include "cuda/attn_plan.cuh"
#include "cuda/attn_simt.cuh"
#include "cuda/check.h"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace attn_detail {
namespace {

// Blocks per SM the decode grid aims for: the bf16 hd-128 block takes 47 KB of shared
// memory, so 4 fit on an SM and keep ~128 KB of K/V loads in flight there.
constexpr int64_t kDecodeBlocksPerSm = 4;

// One block per (token, head) row, one thread per output column (combine_column).
__global__ void attn_combine_kernel(const CombineParams p) {
  for (int64_t c = threadIdx.x; c < p.d; c += blockDim.x) combine_column(p, blockIdx.x, c);
}

int64_t decode_row_blocks(int64_t n_tok, int64_t group) { return ceil_div(n_tok * group, kRowsPerBlock); }

}  // namespace
}  // namespace attn_detail

size_t attention_workspace_bytes(int64_t n_head, int64_t max_tok, int64_t n_ctx, int64_t head_dim_v) {
  using namespace attn_detail;
  const int64_t tok = max_tok < kAttnDecodeMaxTokens ? max_tok : kAttnDecodeMaxTokens;
  if (tok <= 0 || n_head <= 0 || n_ctx <= 0 || head_dim_v <= 0) return 0;
  int64_t splits = ceil_div(n_ctx, kChunkUnit);
  if (splits > kMaxSplits) splits = kMaxSplits;
  return static_cast<size_t>(tok * n_head * splits * (head_dim_v + 2)) * sizeof(float);
}

void attention_decode(const AttnArgs& a, void* workspace, cudaStream_t s) {
  using namespace attn_detail;
  check_args(a, "cuda attention_decode");
  if (a.n_tok > kAttnDecodeMaxTokens)
    fail_message("cuda attention_decode: n_tok = " + std::to_string(a.n_tok) + " must be at most " +
                 std::to_string(kAttnDecodeMaxTokens));
  if (a.n_tok == 0) return;
  if (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    fail_message("cuda attention_decode: workspace must be a 16-byte aligned device buffer");
  const int64_t d = a.head_dim_k, group = a.n_head / a.n_head_kv;
  const int64_t row_blocks = decode_row_blocks(a.n_tok, group);
  const int64_t splits = decode_splits(a.n_ctx, a.n_head_kv, row_blocks, kDecodeBlocksPerSm * sm_count());

  SimtParams p{};
  p.q = a.q;
  p.ldq = a.ldq;
  p.k = a.k_cache;
  p.v = a.v_cache;
  p.kv_stride = a.n_head_kv * d;
  p.out = a.out;
  p.ldo = a.ldo;
  p.part_acc = static_cast<float*>(workspace);
  p.part_ml = p.part_acc + a.n_tok * a.n_head * splits * d;
  p.d_pos = a.d_pos;
  p.n_tok = a.n_tok;
  p.n_ctx = a.n_ctx;
  p.group = group;
  p.n_head = a.n_head;
  p.splits = splits;
  p.row_blocks = row_blocks;
  p.scale = a.scale;
  p.round = a.round;
  dispatch_simt<true>(a.kv_type, d, p, dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(a.n_head_kv),
                                            static_cast<unsigned>(splits)),
                      s);

  CombineParams c{};
  c.part_acc = p.part_acc;
  c.part_ml = p.part_ml;
  c.d_pos = a.d_pos;
  c.out = a.out;
  c.ldo = a.ldo;
  c.n_tok = a.n_tok;
  c.n_ctx = a.n_ctx;
  c.n_head = a.n_head;
  c.splits = splits;
  c.d = d;
  c.round = a.round;
  attn_combine_kernel<<<static_cast<unsigned>(a.n_tok * a.n_head), static_cast<unsigned>(d), 0, s>>>(c);
  FT_CUDA_CHECK_LAUNCH();
}

void attention(const AttnArgs& a, void* workspace, cudaStream_t s) {
  if (a.n_tok <= kAttnDecodeMaxTokens) return attention_decode(a, workspace, s);
  attention_prefill(a, s);
}

}  // namespace ft::cuda
