// kv_store (cuda/attention.h): n_tok rows of K and V, fp32 in, converted to the cache type
// with round-to-nearest-even (as engine::KvCache::store) at rows *d_pos .. *d_pos+n_tok-1.
// One thread per element; the position is read on the device (graph capture).
#include "cuda/attention.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/attn_plan.cuh"
#include "cuda/attn_types.cuh"
#include "cuda/check.h"
#include "cuda/pdl.cuh"

namespace ft::cuda {
namespace {

using attn_detail::kv_slot;
using attn_detail::KvSlot;


template <class T>
__global__ void kv_store_kernel(T* kc, T* vc, int64_t k_dim, int64_t v_dim, const float* k, int64_t ldk,
                                const float* v, int64_t ldv, int64_t n_tok, const int32_t* d_pos) {
  pdl_wait();
  pdl_trigger();
  const int64_t pos = *d_pos;
  const int64_t n_all = n_tok * (k_dim + v_dim);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const KvSlot e = kv_slot(i, n_tok, k_dim, v_dim, ldk, ldv, pos);
    if (e.is_v)
      vc[e.dst] = attn_detail::from_float<T>(v[e.src]);
    else
      kc[e.dst] = attn_detail::from_float<T>(k[e.src]);
  }
}

template <class T>
void launch(void* k_cache, void* v_cache, int64_t k_dim, int64_t v_dim, const float* k, int64_t ldk, const float* v,
            int64_t ldv, int64_t n_tok, const int32_t* d_pos, cudaStream_t s) {
  constexpr int kThreads = 256;
  const int64_t n_all = n_tok * (k_dim + v_dim);
  int64_t blocks = (n_all + kThreads - 1) / kThreads;
  if (blocks > 65536) blocks = 65536;  // grid-stride beyond that
  launch_pdl(kv_store_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, s,
             static_cast<T*>(k_cache), static_cast<T*>(v_cache), k_dim, v_dim, k, ldk, v, ldv,
             n_tok, d_pos);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void kv_store(KvType t, void* k_cache, void* v_cache, int64_t k_dim, int64_t v_dim, const float* k, int64_t ldk,
              const float* v, int64_t ldv, int64_t n_tok, const int32_t* d_pos, cudaStream_t s) {
  if (n_tok < 0 || k_dim <= 0 || v_dim <= 0 || ldk < k_dim || ldv < v_dim)
    fail_message("cuda kv_store: need n_tok >= 0, k_dim, v_dim > 0, ldk >= k_dim, ldv >= v_dim (got n_tok = " +
                 std::to_string(n_tok) + ", k_dim = " + std::to_string(k_dim) + ", v_dim = " + std::to_string(v_dim) +
                 ", ldk = " + std::to_string(ldk) + ", ldv = " + std::to_string(ldv) + ")");
  if (n_tok == 0) return;
  if (k_cache == nullptr || v_cache == nullptr || k == nullptr || v == nullptr || d_pos == nullptr)
    fail_message("cuda kv_store: k_cache, v_cache, k, v and d_pos must be set");
  switch (t) {
    case KvType::kF32: return launch<float>(k_cache, v_cache, k_dim, v_dim, k, ldk, v, ldv, n_tok, d_pos, s);
    case KvType::kBF16: return launch<__nv_bfloat16>(k_cache, v_cache, k_dim, v_dim, k, ldk, v, ldv, n_tok, d_pos, s);
    case KvType::kF16: return launch<__half>(k_cache, v_cache, k_dim, v_dim, k, ldk, v, ldv, n_tok, d_pos, s);
  }
}

}  // namespace ft::cuda
