// Host-side checks of AttnArgs shared by the decode and prefill entries.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "cuda/attention.h"
#include "cuda/check.h"
#include "cuda/device.h"  // sm_count

namespace ft::cuda::attn_detail {

inline int64_t kv_esize(KvType t) { return t == KvType::kF32 ? 4 : 2; }

inline void check_args(const AttnArgs& a, const char* who) {
  const std::string w(who);
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) fail_message(w + ": " + what);
  };
  need(a.n_head > 0 && a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0,
       "n_head = " + std::to_string(a.n_head) + " must be a positive multiple of n_head_kv = " +
           std::to_string(a.n_head_kv));
  need(a.head_dim_k == a.head_dim_v, "head_dim_k = " + std::to_string(a.head_dim_k) +
                                         " must equal head_dim_v = " + std::to_string(a.head_dim_v));
  need(a.head_dim_k == 32 || a.head_dim_k == 64 || a.head_dim_k == 128 || a.head_dim_k == 256,
       "head_dim = " + std::to_string(a.head_dim_k) + " must be 32, 64, 128 or 256");
  need(a.n_tok >= 0, "n_tok = " + std::to_string(a.n_tok) + " must not be negative");
  need(a.n_ctx > 0 && a.n_ctx < (int64_t{1} << 31), "n_ctx = " + std::to_string(a.n_ctx) + " must be in [1, 2^31)");
  need(a.n_tok <= a.n_ctx, "n_tok = " + std::to_string(a.n_tok) + " must not exceed n_ctx = " + std::to_string(a.n_ctx));
  need(a.q != nullptr && a.out != nullptr && a.d_pos != nullptr && a.k_cache != nullptr && a.v_cache != nullptr,
       "q, out, d_pos, k_cache and v_cache must be set");
  need(a.ldq >= a.n_head * a.head_dim_k, "ldq = " + std::to_string(a.ldq) + " must be at least n_head*head_dim_k");
  need(a.ldo >= a.n_head * a.head_dim_v, "ldo = " + std::to_string(a.ldo) + " must be at least n_head*head_dim_v");
  need(reinterpret_cast<uintptr_t>(a.k_cache) % 16 == 0 && reinterpret_cast<uintptr_t>(a.v_cache) % 16 == 0,
       "k_cache and v_cache must be 16-byte aligned");
}

}  // namespace ft::cuda::attn_detail
