// deltanet_chunked (deltanet.h): grid (H_v, D / R row groups of S), 256 threads, one chunk of
// C = 64 tokens after another. Every row r of S_j evolves on its own given the chunk's keys,
// queries and gates, so a block keeps only its R rows of S (shared memory) and the chunk's
// normalised q and k; the C x C products k_t . k_s and q_t . k_s are recomputed by each row
// group (cheap next to the S products). Per chunk:
//   a) K, Q rows, G_t (cumulative g, one thread), beta_t into shared memory;
//   b) A[t][s] = beta_t e^{G_t - G_s} k_t.k_s (s < t), M[t][s] = e^{G_t - G_s} q_t.k_s (s <= t);
//   c) P[t][r] = beta_t (v_t[r] - e^{G_t} S0[r].k_t),  O[t][r] = e^{G_t} S0[r].q_t;
//   d) u_t[r] = P[t][r] - sum_{s<t} A[t][s] u_s[r]   (one thread per row, tokens in order);
//   e) o_t[r] = (O[t][r] + sum_{s<=t} M[t][s] u_s[r]) / sqrt(d);
//   f) S[r] = e^{G_n} S[r] + sum_s u_s[r] e^{G_n - G_s} k_s.
// Exponents are differences of cumulative sums (never products of exps: G reaches -1000s).
#include <cmath>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/deltanet.h"
#include "cuda/ops_math.cuh"

namespace ft::cuda {
namespace {

constexpr int C = static_cast<int>(kDeltaNetChunk);
constexpr int kThreads = 256;

template <int D>
struct Smem {
  static constexpr int R = D < 32 ? D : 32;
  float k[C][D + 1];  // +1: rows read down a column do not share a bank
  float q[C][D + 1];
  float a[C][C + 1];
  float m[C][C + 1];
  float s[R][D + 1];
  float u[C][R + 1];
  float o[C][R + 1];
  float g[C], beta[C];
};

template <int D>
__global__ void __launch_bounds__(kThreads) chunked_kernel(DeltaNetArgs p, const float* gb, float scale) {
  extern __shared__ unsigned char smem_raw[];
  Smem<D>& sm = *reinterpret_cast<Smem<D>*>(smem_raw);
  constexpr int R = Smem<D>::R;
  const int tid = threadIdx.x;
  const int64_t j = blockIdx.x;
  const int64_t i = j % p.n_k_heads;
  const int r0 = blockIdx.y * R;
  const int64_t key_dim = p.n_k_heads * D;
  const bool fresh = p.d_pos != nullptr && *p.d_pos == 0;
  float* Sg = p.state + j * D * D;
  for (int e = tid; e < R * D; e += kThreads) {
    const int r = e / D, c = e % D;
    sm.s[r][c] = fresh ? 0.0f : Sg[static_cast<int64_t>(r0 + r) * D + c];
  }
  for (int64_t t0 = 0; t0 < p.n_tok; t0 += C) {
    const int n = static_cast<int>(p.n_tok - t0 < C ? p.n_tok - t0 : C);
    // a) the chunk's rows (zero past n: padded tokens change nothing).
    for (int e = tid; e < C * D; e += kThreads) {
      const int t = e / D, c = e % D;
      const float* yt = p.y + (t0 + t) * p.ldy;
      sm.k[t][c] = t < n ? yt[key_dim + i * D + c] : 0.0f;
      sm.q[t][c] = t < n ? yt[i * D + c] : 0.0f;
    }
    if (tid == 0) {
      float acc = 0.0f;
      for (int t = 0; t < C; ++t) {
        const float* gt = gb + ((t0 + t) * p.n_v_heads + j) * 3;
        if (t < n) acc = ops::add_rn(acc, gt[2]);
        sm.g[t] = acc;
        sm.beta[t] = t < n ? gt[1] : 0.0f;
      }
    }
    __syncthreads();
    // b) the C x C gated products.
    for (int e = tid; e < C * C; e += kThreads) {
      const int t = e / C, s = e % C;
      float kk = 0.0f, qk = 0.0f;
      if (s <= t) {
        for (int c = 0; c < D; ++c) {
          kk = ops::fma_rn(sm.k[t][c], sm.k[s][c], kk);
          qk = ops::fma_rn(sm.q[t][c], sm.k[s][c], qk);
        }
        const float dec = ops::exp_f32(ops::sub_rn(sm.g[t], sm.g[s]));
        sm.a[t][s] = s < t ? ops::mul_rn(ops::mul_rn(sm.beta[t], dec), kk) : 0.0f;
        sm.m[t][s] = ops::mul_rn(dec, qk);
      } else {
        sm.a[t][s] = 0.0f;
        sm.m[t][s] = 0.0f;
      }
    }
    // c) what the entry state contributes.
    for (int e = tid; e < C * R; e += kThreads) {
      const int t = e / R, r = e % R;
      float sk = 0.0f, sq = 0.0f;
      for (int c = 0; c < D; ++c) {
        sk = ops::fma_rn(sm.s[r][c], sm.k[t][c], sk);
        sq = ops::fma_rn(sm.s[r][c], sm.q[t][c], sq);
      }
      const float eg = ops::exp_f32(sm.g[t]);
      const float v = t < n ? p.y[(t0 + t) * p.ldy + 2 * key_dim + j * D + r0 + r] : 0.0f;
      sm.u[t][r] = ops::mul_rn(sm.beta[t], ops::sub_rn(v, ops::mul_rn(eg, sk)));
      sm.o[t][r] = ops::mul_rn(eg, sq);
    }
    __syncthreads();
    // d) forward substitution, a thread per row.
    if (tid < R) {
      const int r = tid;
      for (int t = 1; t < n; ++t) {
        float acc = sm.u[t][r];
        for (int s = 0; s < t; ++s) acc = ops::fma_rn(-sm.a[t][s], sm.u[s][r], acc);
        sm.u[t][r] = acc;
      }
    }
    __syncthreads();
    // e) outputs.
    for (int e = tid; e < n * R; e += kThreads) {
      const int t = e / R, r = e % R;
      float acc = sm.o[t][r];
      for (int s = 0; s <= t; ++s) acc = ops::fma_rn(sm.m[t][s], sm.u[s][r], acc);
      p.out[(t0 + t) * p.ldo + j * D + r0 + r] = ops::mul_rn(acc, scale);
    }
    // f) the state after the chunk: keys weighted by their decay to the chunk's end.
    const float gn = sm.g[C - 1];
    for (int e = tid; e < C * D; e += kThreads) {
      const int t = e / D, c = e % D;
      sm.k[t][c] = ops::mul_rn(sm.k[t][c], ops::exp_f32(ops::sub_rn(gn, sm.g[t])));
    }
    __syncthreads();
    const float en = ops::exp_f32(gn);
    for (int e = tid; e < R * D; e += kThreads) {
      const int r = e / D, c = e % D;
      float acc = ops::mul_rn(sm.s[r][c], en);
      for (int t = 0; t < n; ++t) acc = ops::fma_rn(sm.u[t][r], sm.k[t][c], acc);
      sm.s[r][c] = acc;
    }
    __syncthreads();
  }
  for (int e = tid; e < R * D; e += kThreads) {
    const int r = e / D, c = e % D;
    Sg[static_cast<int64_t>(r0 + r) * D + c] = sm.s[r][c];
  }
}

template <int D>
void launch(const DeltaNetArgs& a, const float* gb, float scale, cudaStream_t s) {
  constexpr int R = Smem<D>::R;
  const size_t bytes = sizeof(Smem<D>);
  static bool attr = false;  // once per process and D (not thread-safe: set-up path)
  if (!attr) {
    FT_CUDA_CHECK(cudaFuncSetAttribute(chunked_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
    attr = true;
  }
  chunked_kernel<D><<<dim3(static_cast<unsigned>(a.n_v_heads), D / R), kThreads, bytes, s>>>(a, gb, scale);
}

}  // namespace

void deltanet_chunked(const DeltaNetArgs& a, float* gb, cudaStream_t s) {
  deltanet_check(a);
  if (a.n_tok <= 0) return;
  deltanet_prepare(a, gb, s);
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(a.d));
  switch (a.d) {
    case 16: launch<16>(a, gb, inv_sqrt_d, s); break;
    case 32: launch<32>(a, gb, inv_sqrt_d, s); break;
    case 64: launch<64>(a, gb, inv_sqrt_d, s); break;
    default: launch<128>(a, gb, inv_sqrt_d, s); break;
  }
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
