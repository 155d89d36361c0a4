// qk_norm_rope, qk_norm_rope_store and qk_norm_rope_store_batch (rope.h): one kernel, blocks of
// 4 warps per token, one warp per head. A warp stages its head (after the optional norm,
// rounded as the CPU rounds it) in shared memory, so the rotation can read both members of a
// pair before either is overwritten in place. The batch entry differs only in where a token
// sits (d_base set: position d_pos[t], cache row d_base[t] + d_pos[t]; else *d_pos + t for
// both), so a token gets the same bits whichever entry runs it.
#include "cuda/rope.h"

#include <string>
#include <type_traits>

#include "cuda/attn_types.cuh"
#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/ops_reduce.cuh"
#include "cuda/pdl.cuh"
#include "cuda/rope_head.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

// Warps per block, one head per warp: the heads of a token spread over several blocks
// (H200, qk-norm + rope + KV store of 32 + 4 heads: 8.9 us with one block of 8 warps walking
// 4-5 heads each in turn, the global loads of each head waiting on the previous one).
constexpr int kWarps = 4;

// T: the KV-cache element type the k heads (after rotation) and the v heads are stored as
// (KvStore), or void for none. d_base: nullptr for one sequence (token t at *d_pos + t), else
// per token (position d_pos[t], cache row d_base[t] + d_pos[t]).
template <class T>
__global__ void qk_norm_rope_kernel(float* x, int64_t ld, int64_t n_head, int64_t n_head_kv, int64_t hd,
                                    const float* q_norm_w, const float* k_norm_w, float eps, const float* cs,
                                    int n_rot, bool neox, const int32_t* d_pos, const int32_t* d_base, Round r,
                                    KvStore kv) {
  pdl_wait();
  pdl_trigger();
  __shared__ float stage[kWarps][kRopeMaxHeadDim];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x;
  const int64_t pos = d_base != nullptr ? static_cast<int64_t>(d_pos[t]) : static_cast<int64_t>(*d_pos) + t;
  const int64_t row = d_base != nullptr ? static_cast<int64_t>(d_base[t]) + pos : pos;  // K/V cache row
  // This lane's cos/sin pairs, loaded before the heads' norms: they wait on the position load,
  // and fetched in the rotation loop they added a second L2 round trip after the norm (the same
  // values for every head of the token).
  constexpr int kPairs = static_cast<int>(kRopeMaxHeadDim / 64);
  float co[kPairs], si[kPairs];
  rope_detail::load_pairs(cs + pos * n_rot, n_rot, lane, co, si);
  float* buf = stage[warp];
  for (int64_t h = blockIdx.y * kWarps + warp; h < n_head + n_head_kv; h += static_cast<int64_t>(gridDim.y) * kWarps) {
    float* hp = x + t * ld + h * hd;
    rope_detail::head(hp, hp, hd, h < n_head ? q_norm_w : k_norm_w, eps, co, si, n_rot, neox, r, buf, lane);
    if constexpr (!std::is_void_v<T>) {
      if (h >= n_head) {  // a k head: store it as kv_store does (same lanes wrote hp above)
        T* dst = static_cast<T*>(kv.k_cache) + row * n_head_kv * hd + (h - n_head) * hd;
        for (int64_t i = lane; i < hd; i += 32) dst[i] = attn_detail::from_float<T>(hp[i]);
      }
    }
  }
  if constexpr (!std::is_void_v<T>) {  // the v heads, untouched by the norm and the rope
    const int64_t v_dim = n_head_kv * kv.v_head_dim;
    T* dst = static_cast<T*>(kv.v_cache) + row * v_dim;
    const float* src = kv.v + t * kv.ldv;
    for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < v_dim;
         i += static_cast<int64_t>(gridDim.y) * blockDim.x)
      dst[i] = attn_detail::from_float<T>(src[i]);
  }
}

dim3 head_grid(int64_t n_tok, int64_t heads) {
  return dim3(static_cast<unsigned>(n_tok), static_cast<unsigned>((heads + kWarps - 1) / kWarps));
}

void check_args(int64_t hd, int n_rot, int64_t ld, int64_t n_head, int64_t n_head_kv) {
  if (hd <= 0 || hd > kRopeMaxHeadDim)
    fail_message("qk_norm_rope: head_dim " + std::to_string(hd) + " must be in [1, " +
                 std::to_string(kRopeMaxHeadDim) + "]");
  if (n_rot < 0 || n_rot % 2 != 0 || n_rot > hd)
    fail_message("qk_norm_rope: n_rot " + std::to_string(n_rot) + " must be even and at most head_dim " +
                 std::to_string(hd));
  if (ld < (n_head + n_head_kv) * hd)
    fail_message("qk_norm_rope: row stride " + std::to_string(ld) + " is shorter than the q and k heads (" +
                 std::to_string((n_head + n_head_kv) * hd) + ")");
}

void launch_store(float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t n_head_kv, int64_t hd,
                  const float* q_norm_w, const float* k_norm_w, float eps, const float* cs, int n_rot, bool neox,
                  const int32_t* d_pos, const int32_t* d_base, Round r, const KvStore& kv, cudaStream_t s) {
  if (n_tok <= 0) return;
  check_args(hd, n_rot, ld, n_head, n_head_kv);
  if (kv.k_cache == nullptr || kv.v_cache == nullptr || kv.v == nullptr || kv.v_head_dim <= 0 ||
      kv.ldv < n_head_kv * kv.v_head_dim)
    fail_message("qk_norm_rope_store: need both caches, v rows, v_head_dim > 0 and ldv >= n_head_kv * v_head_dim");
  auto go = [&](auto kernel) {
    launch_pdl(kernel, head_grid(n_tok, n_head + n_head_kv), dim3(32 * kWarps), 0, s, x, ld, n_head, n_head_kv, hd,
               q_norm_w, k_norm_w, eps, cs, n_rot, neox, d_pos, d_base, r, kv);
  };
  if (kv.type == KvType::kF32)
    go(qk_norm_rope_kernel<float>);
  else if (kv.type == KvType::kF16)
    go(qk_norm_rope_kernel<__half>);
  else
    go(qk_norm_rope_kernel<__nv_bfloat16>);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void qk_norm_rope(float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t n_head_kv, int64_t hd,
                  const float* q_norm_w, const float* k_norm_w, float eps, const float* cs, int n_rot, bool neox,
                  const int32_t* d_pos, Round r, cudaStream_t s) {
  if (n_tok <= 0) return;
  check_args(hd, n_rot, ld, n_head, n_head_kv);
  launch_pdl(qk_norm_rope_kernel<void>, head_grid(n_tok, n_head + n_head_kv), dim3(32 * kWarps), 0, s, x,
             ld, n_head, n_head_kv, hd, q_norm_w, k_norm_w, eps, cs, n_rot, neox, d_pos, nullptr, r, KvStore{});
  FT_CUDA_CHECK_LAUNCH();
}

void qk_norm_rope_store(float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t n_head_kv, int64_t hd,
                        const float* q_norm_w, const float* k_norm_w, float eps, const float* cs, int n_rot,
                        bool neox, const int32_t* d_pos, Round r, const KvStore& kv, cudaStream_t s) {
  launch_store(x, ld, n_tok, n_head, n_head_kv, hd, q_norm_w, k_norm_w, eps, cs, n_rot, neox, d_pos, nullptr, r, kv,
               s);
}

void qk_norm_rope_store_batch(float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t n_head_kv, int64_t hd,
                              const float* q_norm_w, const float* k_norm_w, float eps, const float* cs, int n_rot,
                              bool neox, const int32_t* d_pos, const int32_t* d_base, Round r, const KvStore& kv,
                              cudaStream_t s) {
  if (n_tok > 0 && (d_pos == nullptr || d_base == nullptr))
    fail_message("qk_norm_rope_store_batch: need the per-token positions and slot bases");
  launch_store(x, ld, n_tok, n_head, n_head_kv, hd, q_norm_w, k_norm_w, eps, cs, n_rot, neox, d_pos, d_base, r, kv,
               s);
}

}  // namespace ft::cuda
