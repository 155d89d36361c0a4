// One head of qk_norm_rope (rope.h) by one warp: the optional RMSNorm over the head (a double sum
// of the float squares, lane i taking elements i, i + 32, ...; rounded as the CPU rounds it),
// staged in shared memory so the rotation reads both members of a pair before either is written,
// then the rotation of the first n_rot elements (first product fused, second rounded, as
// engine::rope_apply) and the rest copied. Shared by the rope kernel (rope.cu) and the decode
// attention that ropes its own q and new key (attn_decode.cuh): one body, the same bits. CUDA only.
#pragma once

#include <cstdint>

#include "cuda/ops_math.cuh"
#include "cuda/ops_reduce.cuh"
#include "cuda/round.cuh"

namespace ft::cuda::rope_detail {

// A decode attention kernel's rope inside (cuda::AttnArgs::qkv_raw; rq nullptr: q is roped and the
// new key and value are in the cache): one token's raw q heads (head h at rq + h D), k heads
// (rk + g D) and v heads (rv + g D), normed and rotated by head() below; the kernel stores the new
// key and value into k_store / v_store (the caches) at row *d_pos. One struct for the dedicated and
// the tensor-core decode kernels' parameters (the members, their order and offsets as each had them
// written out: the same machine code, bench/sass_same.py, session 36).
struct RopeInside {
  const float *rq, *rk, *rv;
  const float *q_norm_w, *k_norm_w;
  float eps;
  const float* rope_cs;
  int n_rot;
  bool neox;
  void *k_store, *v_store;
};

// This lane's cos/sin pairs i = lane + 32k (k < KP) of the rope table row c (n_rot / 2 pairs).
template <int KP>
__device__ __forceinline__ void load_pairs(const float* c, int n_rot, int lane, float (&co)[KP], float (&si)[KP]) {
  const int half = n_rot / 2;
#pragma unroll
  for (int k = 0; k < KP; ++k) {
    const int i = lane + 32 * k;
    co[k] = i < half ? c[2 * i] : 0.0f;
    si[k] = i < half ? c[2 * i + 1] : 0.0f;
  }
}

// src: the head (hd floats); dst: where the result goes (may be src); w: norm weights or nullptr
// (no norm); buf: hd floats of this warp's shared memory. Every lane of the warp calls it.
template <int KP>
__device__ __forceinline__ void head(const float* src, float* dst, int64_t hd, const float* w, float eps,
                                     const float (&co)[KP], const float (&si)[KP], int n_rot, bool neox, Round r,
                                     float* buf, int lane) {
  if (w != nullptr) {
    double sum = 0.0;
    for (int64_t i = lane; i < hd; i += 32) {
      const float v = src[i];
      sum += static_cast<double>(ops::mul_rn(v, v));
    }
    sum = ops::warp_sum(sum);
    const float mean = static_cast<float>(sum / static_cast<double>(hd));
    const float s = ops::div_rn(1.0f, __fsqrt_rn(ops::add_rn(mean, eps)));
    for (int64_t i = lane; i < hd; i += 32) buf[i] = round_to(r, ops::mul_rn(ops::mul_rn(src[i], s), w[i]));
  } else {
    for (int64_t i = lane; i < hd; i += 32) buf[i] = src[i];
  }
  __syncwarp();
  const int half = n_rot / 2;
#pragma unroll
  for (int k = 0; k < KP; ++k) {
    const int i = lane + 32 * k;
    if (i >= half) break;
    const int ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
    const float a = buf[ia], b = buf[ib];
    dst[ia] = round_to(r, ops::fma_rn(a, co[k], -ops::mul_rn(b, si[k])));
    dst[ib] = round_to(r, ops::fma_rn(a, si[k], ops::mul_rn(b, co[k])));
  }
  if (w != nullptr || dst != src)
    for (int64_t i = n_rot + lane; i < hd; i += 32) dst[i] = buf[i];
  __syncwarp();  // buf may be refilled; dst is final
}

}  // namespace ft::cuda::rope_detail
