// qk_norm_rope_store_batch (rope_batch.h): rope.cu's kernel with a position and a cache row
// per token. One warp per head, 4 heads per block, the head staged in shared memory so the
// rotation reads both members of a pair before either is overwritten.
#include "cuda/rope_batch.h"

#include <string>

#include "cuda/attn_types.cuh"
#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/ops_reduce.cuh"
#include "cuda/pdl.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr int kWarps = 4;

template <class T>
__global__ void qk_norm_rope_batch_kernel(float* x, int64_t ld, int64_t n_head, int64_t n_head_kv, int64_t hd,
                                          const float* q_norm_w, const float* k_norm_w, float eps, const float* cs,
                                          int n_rot, bool neox, const int32_t* d_pos, const int32_t* d_base, Round r,
                                          KvStore kv) {
  pdl_wait();
  pdl_trigger();
  __shared__ float stage[kWarps][kRopeMaxHeadDim];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x;
  const int64_t pos = d_pos[t];
  const int64_t row = static_cast<int64_t>(d_base[t]) + pos;
  const float* c = cs + pos * n_rot;
  const int half = n_rot / 2;
  float* buf = stage[warp];
  for (int64_t h = blockIdx.y * kWarps + warp; h < n_head + n_head_kv; h += static_cast<int64_t>(gridDim.y) * kWarps) {
    float* hp = x + t * ld + h * hd;
    const float* w = h < n_head ? q_norm_w : k_norm_w;
    if (w != nullptr) {
      double sum = 0.0;
      for (int64_t i = lane; i < hd; i += 32) {
        const float v = hp[i];
        sum += static_cast<double>(ops::mul_rn(v, v));
      }
      sum = ops::warp_sum(sum);
      const float mean = static_cast<float>(sum / static_cast<double>(hd));
      const float s = ops::div_rn(1.0f, __fsqrt_rn(ops::add_rn(mean, eps)));
      for (int64_t i = lane; i < hd; i += 32) buf[i] = round_to(r, ops::mul_rn(ops::mul_rn(hp[i], s), w[i]));
    } else {
      for (int64_t i = lane; i < hd; i += 32) buf[i] = hp[i];
    }
    __syncwarp();
    for (int i = lane; i < half; i += 32) {
      const int ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
      const float a = buf[ia], b = buf[ib], co = c[2 * i], si = c[2 * i + 1];
      hp[ia] = round_to(r, ops::fma_rn(a, co, -ops::mul_rn(b, si)));
      hp[ib] = round_to(r, ops::fma_rn(a, si, ops::mul_rn(b, co)));
    }
    if (w != nullptr)
      for (int64_t i = n_rot + lane; i < hd; i += 32) hp[i] = buf[i];
    __syncwarp();
    if (h >= n_head) {
      T* dst = static_cast<T*>(kv.k_cache) + row * n_head_kv * hd + (h - n_head) * hd;
      for (int64_t i = lane; i < hd; i += 32) dst[i] = attn_detail::from_float<T>(hp[i]);
    }
  }
  const int64_t v_dim = n_head_kv * kv.v_head_dim;
  T* dst = static_cast<T*>(kv.v_cache) + row * v_dim;
  const float* src = kv.v + t * kv.ldv;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < v_dim;
       i += static_cast<int64_t>(gridDim.y) * blockDim.x)
    dst[i] = attn_detail::from_float<T>(src[i]);
}

}  // namespace

void qk_norm_rope_store_batch(float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t n_head_kv, int64_t hd,
                              const float* q_norm_w, const float* k_norm_w, float eps, const float* cs, int n_rot,
                              bool neox, const int32_t* d_pos, const int32_t* d_base, Round r, const KvStore& kv,
                              cudaStream_t s) {
  if (n_tok <= 0) return;
  if (hd <= 0 || hd > kRopeMaxHeadDim || n_rot < 0 || n_rot % 2 != 0 || n_rot > hd || ld < (n_head + n_head_kv) * hd)
    fail_message("qk_norm_rope_store_batch: head_dim " + std::to_string(hd) + ", n_rot " + std::to_string(n_rot) +
                 ", ld " + std::to_string(ld) + " out of range");
  if (kv.k_cache == nullptr || kv.v_cache == nullptr || kv.v == nullptr || kv.v_head_dim <= 0 ||
      kv.ldv < n_head_kv * kv.v_head_dim || d_pos == nullptr || d_base == nullptr)
    fail_message("qk_norm_rope_store_batch: need both caches, v rows, positions and slot bases");
  const dim3 grid(static_cast<unsigned>(n_tok), static_cast<unsigned>((n_head + n_head_kv + kWarps - 1) / kWarps));
  auto go = [&](auto kernel) {
    launch_pdl(kernel, grid, dim3(32 * kWarps), 0, s, x, ld, n_head, n_head_kv, hd, q_norm_w, k_norm_w, eps, cs,
               n_rot, neox, d_pos, d_base, r, kv);
  };
  if (kv.type == KvType::kF32)
    go(qk_norm_rope_batch_kernel<float>);
  else if (kv.type == KvType::kF16)
    go(qk_norm_rope_batch_kernel<__half>);
  else
    go(qk_norm_rope_batch_kernel<__nv_bfloat16>);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
