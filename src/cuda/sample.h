// Next-token choice on the GPU: the CUDA twins of engine::argmax and engine::Sampler::sample
// (engine/sampler.cpp), so that a decode step (and its CUDA graph) ends with a token id on
// the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <random>

namespace ft::cuda {

// out[t] = index of the first maximum of logits row t (rows ld apart), as engine::argmax.
// Without scratch one block a row (any n_vocab; 262144 takes one pass of 1 MB a row). With
// scratch -- argmax_scratch_bytes(n_rows) bytes of device memory, zeroed once by its owner and
// left zeroed by every call; one call at a time on it -- a row's logits are split over many
// blocks (16-byte aligned rows, n_vocab % 4 == 0; otherwise the one-block kernel).
void argmax(const float* logits, int64_t ld, int64_t n_vocab, int64_t n_rows, int32_t* out, cudaStream_t s,
            void* scratch = nullptr);
size_t argmax_scratch_bytes(int64_t n_rows);

// Host-side copy of engine::SamplerParams plus the repetition window on the device.
struct SampleParams {
  float temperature = 0.8f;  // <= 0: greedy
  int32_t top_k = 40;        // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  // Device: the last tokens seen (the CPU sampler's history, at most repeat_last_n of them);
  // duplicates and ids outside [0, n_vocab) are ignored, as on the CPU, so a graph-captured
  // step can pass a fixed window of repeat_last_n slots padded with -1.
  const int32_t* penalty_tokens = nullptr;
  int32_t n_penalty = 0;
};

// The CPU sampler's draw (engine::Sampler::sample): the host makes it with the sampler's
// seed and uploads it as `u` below, one draw per non-greedy token.
inline double sample_draw(std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }

// Bytes of the workspace `sample` needs for n_vocab logits (queries CUB: needs a device).
size_t sample_workspace_bytes(int64_t n_vocab);

// One token from one row of n_vocab logits (not modified) into *out (device), with the
// CPU sampler's chain: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
// `u` is the device copy of the CPU sampler's draw r = uniform_real_distribution<double>
// (0, 1)(mt19937_64): a double, because a float would move r across a cumulative-probability
// boundary now and then. Given the same r the GPU picks the CPU's token: candidates are
// sorted by (logit descending, id ascending) exactly as the CPU sorts them, and the softmax
// and scans do the CPU's fp32/double operations; only the order of the double sums differs
// (tree instead of loop, ~1e-16 relative), and exp as in ops_math.cuh.
// temperature <= 0: greedy on the penalised logits (u is not read).
// ws: sample_workspace_bytes(n_vocab) bytes of device memory, 256-byte aligned.
void sample(const float* logits, int64_t n_vocab, const SampleParams& p, const double* u, int32_t* out, void* ws,
            cudaStream_t s);

}  // namespace ft::cuda
