// Embedding lookup (embed.h): one block per token, each thread decodes 8 consecutive
// elements at a time with the host-tested decoders of embed_decode.cuh. Runs once per step
// on one row, so it is launch-bound: no staging, plain loads.
#include "cuda/embed.h"

#include <string>

#include "cuda/check.h"
#include "cuda/embed_decode.cuh"
#include "cuda/pdl.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 128;

template <GgmlType T>
__global__ void embed_kernel(const uint8_t* table, int64_t row_bytes, int64_t n_embd, int64_t n_vocab,
                             float scale, const int32_t* tokens, float* x, int64_t ldx, int* bad) {
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  const int32_t id = tokens[t];
  float* y = x + t * ldx;
  if (id < 0 || id >= n_vocab) {
    for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) y[i] = 0.0f;
    if (threadIdx.x == 0 && bad != nullptr) *bad = 1;
    return;
  }
  const uint8_t* row = table + id * row_bytes;
  for (int64_t e = 8 * static_cast<int64_t>(threadIdx.x); e < n_embd; e += 8 * blockDim.x) {
    float v[8];
    embed_detail::Decode<T>::run(row, e, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) y[e + i] = ops::mul_rn(v[i], scale);
  }
}

template <GgmlType T>
void launch(const uint8_t* table, int64_t row_bytes, int64_t n_embd, int64_t n_vocab, float scale,
            const int32_t* tokens, int64_t n_tok, float* x, int64_t ldx, int* bad, cudaStream_t s) {
  using D = embed_detail::Decode<T>;
  const std::string name(type_name(T));
  if (n_embd % 8 != 0 || n_embd % D::kBlock != 0)
    fail_message("embed: n_embd " + std::to_string(n_embd) + " of a " + name +
                 " table must be a multiple of 8 and of the block size " + std::to_string(D::kBlock));
  if (row_bytes < ft::row_bytes(T, n_embd))
    fail_message("embed: row_bytes " + std::to_string(row_bytes) + " is below the " + name + " row size " +
                 std::to_string(ft::row_bytes(T, n_embd)));
  if ((reinterpret_cast<uintptr_t>(table) | static_cast<uintptr_t>(row_bytes)) % D::kAlign != 0)
    fail_message("embed: the " + name + " table and its row stride must be " + std::to_string(D::kAlign) +
                 "-byte aligned");
  launch_pdl(embed_kernel<T>, dim3(static_cast<unsigned>(n_tok)), dim3(kThreads), 0, s, table,
             row_bytes, n_embd, n_vocab, scale, tokens, x, ldx, bad);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool embed_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
    case GgmlType::MXFP4:
    case GgmlType::NVFP4: return true;
    default: return false;
  }
}

void embed(GgmlType type, const uint8_t* table, int64_t row_bytes, int64_t n_embd, int64_t n_vocab,
           float scale, const int32_t* tokens, int64_t n_tok, float* x, int64_t ldx, int* bad,
           cudaStream_t s) {
  if (n_tok <= 0) return;
  if (n_tok > 0x7fffffff) fail_message("embed: n_tok " + std::to_string(n_tok) + " exceeds the grid limit");
  switch (type) {
    case GgmlType::F32: return launch<GgmlType::F32>(table, row_bytes, n_embd, n_vocab, scale, tokens, n_tok, x, ldx, bad, s);
    case GgmlType::F16: return launch<GgmlType::F16>(table, row_bytes, n_embd, n_vocab, scale, tokens, n_tok, x, ldx, bad, s);
    case GgmlType::BF16: return launch<GgmlType::BF16>(table, row_bytes, n_embd, n_vocab, scale, tokens, n_tok, x, ldx, bad, s);
    case GgmlType::Q8_0: return launch<GgmlType::Q8_0>(table, row_bytes, n_embd, n_vocab, scale, tokens, n_tok, x, ldx, bad, s);
    case GgmlType::Q4_K: return launch<GgmlType::Q4_K>(table, row_bytes, n_embd, n_vocab, scale, tokens, n_tok, x, ldx, bad, s);
    case GgmlType::Q6_K: return launch<GgmlType::Q6_K>(table, row_bytes, n_embd, n_vocab, scale, tokens, n_tok, x, ldx, bad, s);
    case GgmlType::MXFP4: return launch<GgmlType::MXFP4>(table, row_bytes, n_embd, n_vocab, scale, tokens, n_tok, x, ldx, bad, s);
    case GgmlType::NVFP4: return launch<GgmlType::NVFP4>(table, row_bytes, n_embd, n_vocab, scale, tokens, n_tok, x, ldx, bad, s);
    default: fail_message("embed: token_embd type " + std::string(type_name(type)) + " is not supported on the GPU (expected F32, F16, BF16, Q8_0, Q4_K, Q6_K, MXFP4 or NVFP4)");
  }
}

}  // namespace ft::cuda
