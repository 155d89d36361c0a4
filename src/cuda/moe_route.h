// MoE routing on the GPU: the CUDA twin of engine::moe_route (engine/moe.cpp) for n_tok rows
// of router logits (fp32, rows ld apart):
//   probs = softmax(logits)      max, e = exp_v(l - max) with its sum as engine/vec_math.h exp_sum
//                                rounds them (groups of 8, fp32 pairs, a double), probs = e * float(1/sum)
//   ids   = the first n_used experts of std::sort(0..n_expert-1, probs[a] > probs[b])
//   w_k   = probs[ids_k] / max(float(sum_k double(probs[ids_k])), 6.103515625e-5)
// ids / weights are [n_tok][n_used] (device). Without ties in the top n_used the order is
// just rank by probability, computed in parallel; when a tie reaches the top n_used the
// kernel runs a step-for-step twin of libstdc++'s std::sort (stl_sort.cuh) on one thread,
// so tied experts are chosen and ordered exactly as on the CPU. exp as in ops_math.cuh
// (rarely 1 ulp from glibc's expf). One block per token; n_expert <= kMoeRouteMaxExperts.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/round.h"
#include "format/ggml_type.h"

namespace ft::cuda {

inline constexpr int64_t kMoeRouteMaxExperts = 2048;

void moe_route(const float* logits, int64_t ld, int64_t n_expert, int64_t n_tok, int n_used, int32_t* ids,
               float* weights, cudaStream_t s);

// Route kernel choice for tests and benchmarks (process-wide, not thread-safe): 1 the warp
// route where it fits, with its fast path (moe_route_warp.cuh route_row_warp_fast); 2 the warp
// route without it; 3 (tests) the fast path alone, ids -1 for a token whose top k it finds tied;
// 0 the block route everywhere; -1 the default (1; 2 with FT_MOE_ROUTE_FAST=0).
void moe_route_set_warp(int on);
// route_warp::route_row_warp's `fast` argument for that choice: kernels that route in their own
// CTAs (GemvArgs::route_logits) follow it too.
int moe_route_fast();

// The router GEMV and moe_route in one launch (decode: one kernel fewer per MoE layer):
// logits[t][e] = sum_i W[e][i] * x[t][i] (fp32 products and sums, like the float GEMV, in
// some order), written to `logits` (ld apart), then routed exactly as moe_route routes them,
// by the last block to finish. `ticket` is one device counter, zero before the first call;
// the kernel leaves it zero (graph replays reuse it). Weights F32, BF16 or F16, rows
// row_bytes apart (16-byte aligned), k % 4 == 0, 1..kMoeRouterMaxTokens tokens.
inline constexpr int64_t kMoeRouterMaxTokens = 8;
bool moe_router_route_supported(GgmlType type, int64_t k, int64_t row_bytes, int64_t n_tok);
void moe_router_route(const float* x, int64_t ldx, int64_t n_tok, GgmlType type, const void* w, int64_t row_bytes,
                      int64_t k, int64_t n_expert, float* logits, int64_t ld, int n_used, int32_t* ids,
                      float* weights, unsigned* ticket, cudaStream_t s);

// One token: RMSNorm of x (k floats, norm weights norm_w or none, eps, rounding `round`) into
// h and its Q8 copy xq (act_q8 layout), exactly as rmsnorm_q8 writes them, and the router and
// routing of moe_router_route on the normalised row -- in one launch. k % 32 == 0, k <= 8192,
// 16-byte aligned x, norm_w, h, xq and w (the pointers: the call's own; nullptr passes).
// route false: the launch writes only the logits (ids, weights and ticket untouched): the next
// launch routes them -- GemvArgs::route_logits, whose CTAs route with the same warp route
// (moe_route_warp.cuh) -- so the router's fence, ticket and last-block routing leave the chain.
bool moe_norm_router_route_supported(GgmlType type, int64_t k, int64_t row_bytes, const void* x = nullptr,
                                     const void* norm_w = nullptr, const void* h = nullptr, const void* xq = nullptr,
                                     const void* w = nullptr);
void moe_norm_router_route(const float* x, const float* norm_w, float eps, Round round, float* h, void* xq,
                           int64_t k, GgmlType type, const void* w, int64_t row_bytes, int64_t n_expert, float* logits,
                           int64_t ld, int n_used, int32_t* ids, float* weights, unsigned* ticket, cudaStream_t s,
                           bool route = true);

}  // namespace ft::cuda
