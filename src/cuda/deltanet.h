// Gated DeltaNet recurrence on the GPU: the CUDA twin of the recurrent part of
// engine::deltanet (engine/deltanet.h, shared/spec/arch/qwen35.md §3.2 c-d), after the conv.
//
// Per token t (in order) and value head j, key head i = j mod H_k (GGUF's tiled heads):
//   q = l2norm(y[t] q_i), k = l2norm(y[t] k_i)   (x / sqrt(sum x^2 + eps), as build_gdn_l2_norm)
//   beta = sigmoid(in_b[t][j]);  g = softplus(in_a[t][j] + dt_bias[j]) * a[j]
//   S_j = exp(g) S_j;  u = beta (v_j - S_j k);  S_j += u k^T;  out[t][j] = S_j q / sqrt(d)
// S_j is d x d fp32, row = value index, contiguous over the key index (the CPU's layout).
// The gated RMSNorm that follows is cuda::rmsnorm over the d-wide head rows + gate_mul_silu.
//
// Two launches. deltanet_prepare L2-normalises the q and k heads of y in place (one warp per
// head) and writes per (token, value head) the decay exp(g) and beta. deltanet_recurrent then
// walks the tokens: rows of S are independent given k, q, v[r], so a block owns 32 rows of
// one head, 4 threads per row, each keeping d/4 columns of its row in registers (the state is
// read and written once per call; the token loop has no barrier). d_pos (device, may be
// nullptr): *d_pos == 0 starts a new sequence (S read as zero), so the reset lives inside
// captured graphs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ft::cuda {

struct DeltaNetArgs {
  int64_t n_k_heads = 0, n_v_heads = 0, d = 0;
  float eps = 1e-6f;
  float* y = nullptr;  // [n_tok][ldy]: q (H_k*d) | k (H_k*d) | v (H_v*d), after conv+silu (q, k normalised in place)
  int64_t ldy = 0;
  const float* beta = nullptr;   // [n_tok][ldg] beta logits at beta[t*ldg + j]
  const float* alpha = nullptr;  // [n_tok][ldg] alpha at alpha[t*ldg + j]
  int64_t ldg = 0;
  const float* dt_bias = nullptr;  // [H_v]
  const float* a = nullptr;        // [H_v] = -exp(A_log)
  float* state = nullptr;          // [H_v][d][d], updated
  float* out = nullptr;            // [n_tok][ldo], head j at out + j*d
  int64_t ldo = 0;
  int64_t n_tok = 0;
  const int32_t* d_pos = nullptr;  // *d_pos == 0: new sequence
};

// Head sizes the recurrence is compiled for (the spec's d_k in {16, 32, 64, 128}).
bool deltanet_supported(int64_t d);

// gb: device scratch of n_tok * H_v * 3 floats ({decay, beta, g} per token and value head).
// Normalises a.y's q and k in place, then runs the recurrence.
void deltanet_recurrent(const DeltaNetArgs& a, float* gb, cudaStream_t s);

// The chunked form of the same recurrence (spec qwen35.md §3.3, chunks of kDeltaNetChunk
// tokens): per chunk, with G_t the cumulative sum of g inside it and S0 the entry state,
//   u_t = beta_t (v_t - e^{G_t} S0 k_t - sum_{s<t} e^{G_t - G_s} (k_s . k_t) u_s)   (forward substitution)
//   o_t = (e^{G_t} S0 q_t + sum_{s<=t} e^{G_t - G_s} (q_t . k_s) u_s) / sqrt(d)
//   S   = e^{G_n} S0 + sum_s e^{G_n - G_s} u_s k_s^T
// Exact algebra of the recurrence; equal to it within fp32 rounding (test: 1,100 tokens).
// Same arguments and scratch as deltanet_recurrent, plus 16-byte aligned y rows
// (deltanet_chunked_supported; throws otherwise). Prompts (>= one chunk): one block per
// (value head, 32 rows of S) walks the chunks, register-tiled products in shared memory.
// kCluster (sm_90): the D / 32 row-group blocks of a head form a thread block cluster and
// share the chunk's k.k / q.k products through distributed shared memory (each computes a
// quarter at d 128) instead of each computing all of them; same results bit for bit, but
// measured slower than kPlain on the H200 (FT_GDN_CHUNKED=2 keeps it reachable for A/B runs).
// kSmall (deltanet_chunked_small.cu): the plain kernel's arithmetic in the same order (same
// bits) in <= 99 KiB of shared memory per block (89 KiB at d 128; the plain kernel needs 223
// KiB, so sm_90 only): K and Q staged in slices of 64 components, A and M over the slices'
// space, the keys of the state update read from y. For the GPUs below sm_90 (RTX 30/40/50,
// A100); FT_GDN_CHUNKED=3 forces it on an H200 for measurements.
inline constexpr int64_t kDeltaNetChunk = 64;
enum class DeltaNetChunkedKind { kPlain, kCluster, kSmall };
bool deltanet_chunked_supported(const DeltaNetArgs& a, DeltaNetChunkedKind kind = DeltaNetChunkedKind::kPlain);
void deltanet_chunked(const DeltaNetArgs& a, float* gb, cudaStream_t s,
                      DeltaNetChunkedKind kind = DeltaNetChunkedKind::kPlain);

// Shared memory per block of a chunked kind at head size d (host-side, no device needed).
size_t deltanet_chunked_smem_bytes(int64_t d, DeltaNetChunkedKind kind);
// The kind a device with optin_bytes of opt-in shared memory per block runs prompts with:
// kPlain where it fits (sm_90: 227 KiB), kSmall elsewhere (the caller still asks
// deltanet_chunked_supported, which also checks y's alignment and that kSmall fits).
DeltaNetChunkedKind deltanet_chunked_pick(int64_t optin_bytes, int64_t d);
// deltanet_chunked_pick for the current device (its opt-in limit asked once per device).
DeltaNetChunkedKind deltanet_chunked_default(int64_t d);

// Shared by the two forms (deltanet.cu): argument checks and the prepare launch.
void deltanet_check(const DeltaNetArgs& a);
void deltanet_prepare(const DeltaNetArgs& a, float* gb, cudaStream_t s);
// The kSmall kernel (deltanet_chunked_small.cu), launched by deltanet_chunked after prepare.
size_t deltanet_chunked_small_smem_bytes(int64_t d);
void deltanet_chunked_small(const DeltaNetArgs& a, const float* gb, float scale, cudaStream_t s);

}  // namespace ft::cuda
