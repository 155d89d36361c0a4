// Scalar activation quantisers (the twins of the AVX2 packer) and the q8 route's
// definition, round_trip_act. Rounding rules: see act_quant.h.
#include "quant/act_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fp16.h"

namespace ft::quant {
namespace {

// Round half to even, as _mm256_round_ps(_MM_ROUND_NEAREST) and ggml's nearest_int
// (x + 1.5*2^23 with the default rounding mode) do; |x| <= 2^22 here.
inline int round_even(float x) { return static_cast<int>(std::nearbyint(x)); }

// amax of 32 values, the AVX2 quantiser's max_ps tree gives the same maximum.
inline float block_amax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

}  // namespace

GgmlType act_dot_type(GgmlType w) {
  switch (w) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::MXFP4:
    case GgmlType::NVFP4:
    case GgmlType::IQ4_NL:
    case GgmlType::Q1_0:
    case GgmlType::Q2_0:
      return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return GgmlType::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S:
    case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S:
    case GgmlType::IQ1_S:
    case GgmlType::IQ1_M:
    case GgmlType::IQ4_XS:
    case GgmlType::TQ1_0:
    case GgmlType::TQ2_0:
      return GgmlType::Q8_K;
    case GgmlType::F16:
      return GgmlType::F16;
    case GgmlType::BF16:
      return GgmlType::BF16;
    default:
      return GgmlType::F32;
  }
}

void quantize_q8_0_ref(const float* x, BlockQ8_0* y, int64_t k) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    const float amax = block_amax(x, 32);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = f32_to_f16(d);
    for (int i = 0; i < 32; ++i) y[b].qs[i] = static_cast<int8_t>(round_even(x[i] * id));
  }
}

void quantize_q8_1_ref(const float* x, BlockQ8_1* y, int64_t k) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    const float amax = block_amax(x, 32);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = round_even(x[i] * id);
      y[b].qs[i] = static_cast<int8_t>(q);
      sum += q;
    }
    y[b].d = f32_to_f16(d);
    y[b].s = f32_to_f16(d * static_cast<float>(sum));
  }
}

void quantize_q8_K_ref(const float* x, BlockQ8_K* y, int64_t k) {
  for (int64_t b = 0; b < k / 256; ++b, x += 256) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 256; ++i) {
      const float ax = std::fabs(x[i]);
      if (ax > amax) {
        amax = ax;
        max = x[i];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < 256; ++i)
      y[b].qs[i] = static_cast<int8_t>(std::min(127, round_even(iscale * x[i])));
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += y[b].qs[16 * j + i];
      y[b].bsums[j] = static_cast<int16_t>(s);
    }
    y[b].d = 1.0f / iscale;
  }
}

void round_trip_act(GgmlType dot, const float* x, float* y, int64_t k) {
  switch (dot) {
    case GgmlType::F32:
      std::copy(x, x + k, y);
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < k; ++i) y[i] = f16_to_f32(f32_to_f16(x[i]));
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < k; ++i) y[i] = bf16_to_f32(f32_to_bf16(x[i]));
      return;
    case GgmlType::Q8_0: {
      BlockQ8_0 blk;
      for (int64_t b = 0; b < k / 32; ++b) {
        quantize_q8_0_ref(x + 32 * b, &blk, 32);
        const float d = f16_to_f32(blk.d);
        for (int i = 0; i < 32; ++i) y[32 * b + i] = d * blk.qs[i];
      }
      return;
    }
    case GgmlType::Q8_1: {
      BlockQ8_1 blk;
      for (int64_t b = 0; b < k / 32; ++b) {
        quantize_q8_1_ref(x + 32 * b, &blk, 32);
        const float d = f16_to_f32(blk.d);
        for (int i = 0; i < 32; ++i) y[32 * b + i] = d * blk.qs[i];
      }
      return;
    }
    case GgmlType::Q8_K: {
      BlockQ8_K blk;
      for (int64_t b = 0; b < k / 256; ++b) {
        quantize_q8_K_ref(x + 256 * b, &blk, 256);
        for (int i = 0; i < 256; ++i) y[256 * b + i] = blk.d * blk.qs[i];
      }
      return;
    }
    default:
      fail("round_trip_act: {} is not an activation dot type", type_name(dot));
  }
}

// ---- packed rows --------------------------------------------------------------------

int64_t packed_act_bytes(GgmlType dot, int64_t k) {
  int64_t n = 0;
  if (dot == GgmlType::Q8_0) {
    n = k + 4 * (k / 32);
  } else if (dot == GgmlType::Q8_K) {
    n = k + 4 * (k / 256) + 2 * (k / 16);
  } else {
    fail("packed_act_bytes: {} has no packed form", type_name(dot));
  }
  return (n + 31) / 32 * 32;
}

PackedActRow packed_act_view(GgmlType dot, const void* p, int64_t k) {
  const auto* b = static_cast<const uint8_t*>(p);
  PackedActRow r;
  r.qs = reinterpret_cast<const int8_t*>(b);
  r.d = reinterpret_cast<const float*>(b + k);
  r.bsums =
      dot == GgmlType::Q8_K ? reinterpret_cast<const int16_t*>(b + k + 4 * (k / 256)) : nullptr;
  return r;
}

void pack_act_ref(GgmlType dot, const float* x, void* p, int64_t k) {
  auto* b = static_cast<uint8_t*>(p);
  auto* qs = reinterpret_cast<int8_t*>(b);
  auto* d = reinterpret_cast<float*>(b + k);
  if (dot == GgmlType::Q8_0) {
    BlockQ8_0 blk;
    for (int64_t i = 0; i < k / 32; ++i) {
      quantize_q8_0_ref(x + 32 * i, &blk, 32);
      std::memcpy(qs + 32 * i, blk.qs, 32);
      d[i] = f16_to_f32(blk.d);
    }
  } else if (dot == GgmlType::Q8_K) {
    auto* bsums = reinterpret_cast<int16_t*>(b + k + 4 * (k / 256));
    BlockQ8_K blk;
    for (int64_t i = 0; i < k / 256; ++i) {
      quantize_q8_K_ref(x + 256 * i, &blk, 256);
      std::memcpy(qs + 256 * i, blk.qs, 256);
      d[i] = blk.d;
      std::memcpy(bsums + 16 * i, blk.bsums, sizeof(blk.bsums));
    }
  } else {
    fail("pack_act: {} has no packed form", type_name(dot));
  }
}

void pack_act(GgmlType dot, const float* x, void* p, int64_t k) {
  // Q8_K stays scalar: ggml's x86 build uses the scalar quantiser too, and at one block
  // per 256 weights x n_rows it is a small share of a matmul.
  if (dot == GgmlType::Q8_0 && active_isa() != Isa::kScalar)
    return detail::pack_act_q8_0_avx2(x, p, k);
  pack_act_ref(dot, x, p, k);
}

}  // namespace ft::quant
