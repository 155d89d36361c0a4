#include "moe_cpu/gpu_dot.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/log.h"

namespace ft::moe_cpu {
namespace {

float as_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The GPU decoders' values (cuda/gemv_formats.cuh), bit for bit.
float ue4m3_half(uint32_t x) {
  const uint32_t e = (x >> 3) & 0xF, m = x & 7;
  const float sub = static_cast<float>(m) * (1.0f / 1024.0f);
  const float normal = as_float(((e + 119) << 23) | (m << 20));
  const float v = e == 0 ? sub : normal;
  return (x == 0 || x == 0x7F) ? 0.0f : v;
}
float e8m0_half(uint32_t e) {
  if (e < 2) return as_float(0x00200000u << e);
  return as_float((e - 1) << 23);
}
// E2M1 code * 2^-126 (the float path's representation; x is pre-scaled by 2^64).
float e2m1_scaled(uint32_t n) { return as_float(((n & 7u) << 22) | ((n & 8u) << 28)); }
// 2 * E2M1(code) as an integer (the integer path's e2m1x8_i8 / e2m1x8_pn).
int e2m1_i8(uint32_t n) {
  static constexpr int kMag[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  return (n & 8u) ? -kMag[n & 7u] : kMag[n & 7u];
}
float ld_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

constexpr float kX2e64 = 18446744073709551616.0f;  // 2^64
constexpr float kX2e63 = 9223372036854775808.0f;   // 2^63

// Piece of 8 elements starting at element e (e % 8 == 0) of a row: raw values q and scale d
// with w = d * q (FmtX::piece of gemv_formats.cuh).
void piece(GgmlType type, const uint8_t* row, int64_t e, float* q, float& d) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(q, row + 4 * e, 32);
      d = 1.0f;
      return;
    case GgmlType::F16:
      for (int i = 0; i < 8; ++i) q[i] = ld_f16(row + 2 * (e + i));
      d = 1.0f;
      return;
    case GgmlType::BF16:
      for (int i = 0; i < 8; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * (e + i), 2);
        q[i] = bf16_to_f32(h);
      }
      d = 1.0f;
      return;
    case GgmlType::Q8_0: {
      const uint8_t* b = row + 34 * (e / 32);
      const int o = static_cast<int>(e % 32);
      for (int i = 0; i < 8; ++i) q[i] = static_cast<float>(static_cast<int8_t>(b[2 + o + i]));
      d = ld_f16(b);
      return;
    }
    case GgmlType::MXFP4: {
      const uint8_t* b = row + 17 * (e / 32);
      const int o = static_cast<int>(e % 32);  // 0, 8: low nibbles of bytes o..; 16, 24: high of o-16..
      const int sh = o >= 16 ? 4 : 0, j0 = o % 16;
      for (int i = 0; i < 8; ++i) q[i] = e2m1_scaled(static_cast<uint32_t>(b[1 + j0 + i]) >> sh);
      d = e8m0_half(b[0]);
      return;
    }
    case GgmlType::NVFP4: {
      const uint8_t* b = row + 36 * (e / 64);
      const int o = static_cast<int>(e % 64), s = o / 16, sh = (o % 16) >= 8 ? 4 : 0;
      for (int i = 0; i < 8; ++i) q[i] = e2m1_scaled(static_cast<uint32_t>(b[4 + 8 * s + i]) >> sh);
      d = ue4m3_half(b[s]);
      return;
    }
    default:
      fail("exact GPU order: no float-path mirror for {} weights", type_name(type));
  }
}

bool e2m1_type(GgmlType t) { return t == GgmlType::MXFP4 || t == GgmlType::NVFP4; }

// NVFP4 block c of a row (36 bytes) times the Q8 activations: the 4 sub-block fmas of
// block_dot (gemv_nvfp4_dot.cuh) onto acc.
float nvfp4_block(const uint8_t* b, const GpuActQ8& x, int64_t c, float acc) {
  const int8_t* xs = x.qs + 64 * c;
  for (int s = 0; s < 4; ++s) {
    int is = 0;
    for (int j = 0; j < 8; ++j) {
      const uint32_t byte = b[4 + 8 * s + j];
      is += e2m1_i8(byte & 0xF) * xs[16 * s + j] + e2m1_i8(byte >> 4) * xs[16 * s + 8 + j];
    }
    // The full UE4M3 value (nvfp4_scales: bytes 0x7F -> 0, 0xFF -> 480) is 2 * ue4m3_half.
    const float sw = 2.0f * ue4m3_half(b[s]);
    const float dx = x.d[2 * c + (s >> 1)] * 0.5f;
    acc = std::fma(static_cast<float>(is), sw * dx, acc);
  }
  return acc;
}

// The generic integer kernel's unit at element e0 (64 elements) for Q8_0 / MXFP4 / NVFP4.
float q8_unit(GgmlType type, const uint8_t* row, const GpuActQ8& x, int64_t k, int64_t e0, float acc) {
  if (type == GgmlType::NVFP4) return nvfp4_block(row + 36 * (e0 / 64), x, e0 / 64, acc);
  for (int b = 0; b < 2; ++b) {
    const int64_t eb = e0 + 32 * b;
    if (eb >= k) break;
    const int8_t* xs = x.qs + eb;
    int is = 0;
    float sw;
    if (type == GgmlType::Q8_0) {
      const uint8_t* blk = row + 34 * (eb / 32);
      for (int i = 0; i < 32; ++i) is += static_cast<int8_t>(blk[2 + i]) * xs[i];
      sw = ld_f16(blk);
    } else {  // MXFP4: low nibble of byte j -> element j, high -> j + 16
      const uint8_t* blk = row + 17 * (eb / 32);
      for (int j = 0; j < 16; ++j) is += e2m1_i8(blk[1 + j] & 0xF) * xs[j] + e2m1_i8(blk[1 + j] >> 4) * xs[16 + j];
      sw = e8m0_half(blk[0]);
    }
    acc = std::fma(static_cast<float>(is), sw * x.d[eb / 32], acc);
  }
  return acc;
}

}  // namespace

bool gpu_dot_float_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::MXFP4:
    case GgmlType::NVFP4:
      return true;
    default:
      return false;
  }
}

bool gpu_dot_q8_supported(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::MXFP4 || t == GgmlType::NVFP4;
}

void gpu_quantize_act_q8(const float* x, int64_t k, int8_t* qs, float* d) {
  if (gpu_dot_isa() != Isa::kScalar) return detail::gpu_quantize_act_q8_avx2(x, k, qs, d);
  gpu_quantize_act_q8_ref(x, k, qs, d);
}

void gpu_quantize_act_q8_ref(const float* x, int64_t k, int8_t* qs, float* d) {
  for (int64_t j = 0; j < k / 32; ++j) {
    const float* xb = x + 32 * j;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    d[j] = f16_to_f32(f32_to_f16(amax / 127.0f));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < 32; ++i) qs[32 * j + i] = static_cast<int8_t>(std::nearbyint(xb[i] * id));
  }
}

void gpu_act_aux_size(GgmlType type, int64_t k, GpuActAux& aux) {
  const int span = type == GgmlType::NVFP4 ? 16 : 32;
  aux.sum.resize(static_cast<size_t>(k / span));
  if (type != GgmlType::NVFP4) return;
  aux.nv_ab.resize(static_cast<size_t>(64 * (k / 64)));
  aux.dxh.resize(static_cast<size_t>(2 * (k / 64)));
}

void gpu_act_aux(GgmlType type, const GpuActQ8& x, int64_t k, GpuActAux& aux) {
  gpu_act_aux_size(type, k, aux);
  gpu_act_aux_part(type, x, 0, k, aux);
}

void gpu_act_aux_part(GgmlType type, const GpuActQ8& x, int64_t k0, int64_t k1, GpuActAux& aux) {
  const int span = type == GgmlType::NVFP4 ? 16 : 32;
  for (int64_t j = k0 / span; j < k1 / span; ++j) {
    int32_t sum = 0;
    for (int i = 0; i < span; ++i) sum += x.qs[span * j + i];
    aux.sum[j] = sum;
  }
  if (type != GgmlType::NVFP4) return;
  for (int64_t c = k0 / 64; c < k1 / 64; ++c) {
    // Byte 8s + j of a block's codes holds element 16s + j (low nibble) and 16s + 8 + j
    // (high nibble).
    int8_t* xl = aux.nv_ab.data() + 64 * c;
    for (int s = 0; s < 4; ++s)
      for (int j = 0; j < 8; ++j) {
        xl[8 * s + j] = x.qs[64 * c + 16 * s + j];
        xl[32 + 8 * s + j] = x.qs[64 * c + 16 * s + 8 + j];
      }
    aux.dxh[2 * c] = x.d[2 * c] * 0.5f;
    aux.dxh[2 * c + 1] = x.d[2 * c + 1] * 0.5f;
  }
}

namespace {
std::atomic<int> g_isa_limit{static_cast<int>(Isa::kAvx512)};
}

bool gpu_dot_avx512_supported() {
  const CpuFeatures& f = cpu_features();
  return isa_supported(Isa::kAvx512) && f.avx512vnni;
}

Isa gpu_dot_isa() {
  Isa isa = std::min(active_isa(), static_cast<Isa>(g_isa_limit.load(std::memory_order_relaxed)));
  if (isa == Isa::kAvx512 && !gpu_dot_avx512_supported()) isa = Isa::kAvx2;
  if (isa == Isa::kAvx2 && !isa_supported(Isa::kAvx2)) isa = Isa::kScalar;
  return isa;
}

namespace {
// -1: not read yet (FT_MOE_CPU_PREFETCH is read at the first use).
std::atomic<int> g_prefetch{-1};

detail::Prefetch prefetch_from_env() {
  using detail::Prefetch;
  const char* e = std::getenv("FT_MOE_CPU_PREFETCH");
  const std::string v = e ? e : "next";
  if (v == "next") return Prefetch::kNext;
  if (v == "next-l2") return Prefetch::kNextL2;
  if (v == "next2") return Prefetch::kNext2;
  if (v == "next-128") return Prefetch::kNext128;
  if (v == "row") return Prefetch::kRow;
  if (v == "none") return Prefetch::kNone;
  // First read inside the pool's workers, where a throw would end the process: warn instead.
  log::warn("FT_MOE_CPU_PREFETCH={}: expected next, next2, next-128, next-l2, row or none; using next", v);
  return Prefetch::kNext;
}
}  // namespace

detail::Prefetch detail::gpu_dot_prefetch() {
  int p = g_prefetch.load(std::memory_order_relaxed);
  if (p < 0) {
    static const int from_env = static_cast<int>(prefetch_from_env());
    int expected = -1;
    g_prefetch.compare_exchange_strong(expected, from_env, std::memory_order_relaxed);
    p = g_prefetch.load(std::memory_order_relaxed);
  }
  return static_cast<Prefetch>(p);
}

void detail::gpu_dot_set_prefetch(Prefetch p) { g_prefetch.store(static_cast<int>(p), std::memory_order_relaxed); }

void gpu_dot_limit_isa(Isa max) { g_isa_limit.store(static_cast<int>(max), std::memory_order_relaxed); }

float gpu_lane_tree(float* v, int lanes) {
  for (int o = lanes / 2; o > 0; o /= 2)
    for (int i = 0; i < o; ++i) v[i] = v[i] + v[i + o];
  return v[0];
}

float gpu_dot_float(GgmlType type, const uint8_t* row, const float* x, int64_t k) {
  float acc[32] = {};
  const bool e2m1 = e2m1_type(type);
  for (int64_t c0 = 0; c0 < k; c0 += 1024) {
    const int units = static_cast<int>(std::min<int64_t>(32, (k - c0) / 32));
    for (int lane = 0; lane < 32; ++lane)
      for (int j = 0; j < 4; ++j) {
        const int pg = lane + 32 * j;
        if ((pg >> 2) >= units) break;
        const int64_t e = c0 + 8 * pg;
        float q[8], d, xv[8];
        piece(type, row, e, q, d);
        for (int i = 0; i < 8; ++i) xv[i] = e2m1 ? x[e + i] * kX2e64 : x[e + i];
        float part = 0.0f;
        for (int i = 0; i < 8; ++i) part = std::fma(q[i], xv[i], part);
        if (e2m1) part *= kX2e63;
        acc[lane] = std::fma(part, d, acc[lane]);
      }
  }
  return gpu_lane_tree(acc, 32);
}

float gpu_dot_q8(const GpuDotPlan& plan, GgmlType type, const uint8_t* row, const GpuActQ8& x, int64_t k) {
  if (type == GgmlType::NVFP4 && plan.kind == GpuDot::kNvfp4Packed) {
    float dot = 0.0f;
    for (int64_t c = 0; c < k / 64; ++c) dot += nvfp4_block(row + 36 * c, x, c, 0.0f);
    return dot;
  }
  if (type == GgmlType::NVFP4 && plan.kind == GpuDot::kNvfp4Slab) {
    float acc[32] = {};
    for (int lane = 0; lane < 32; ++lane)
      for (int64_t c = lane; c < k / 64; c += 32) acc[lane] = nvfp4_block(row + 36 * c, x, c, acc[lane]);
    return gpu_lane_tree(acc, 32);
  }
  const int L = plan.lanes;
  if (L != 4 && L != 8 && L != 16 && L != 32) fail("exact GPU order: {} lanes per row (expected 4, 8, 16 or 32)", L);
  float acc[32] = {};
  for (int64_t c0 = 0; c0 < k; c0 += 64 * L)
    for (int kl = 0; kl < L; ++kl) {
      const int64_t e0 = c0 + 64 * kl;
      if (e0 < k) acc[kl] = q8_unit(type, row, x, k, e0, acc[kl]);
    }
  return gpu_lane_tree(acc, L);
}

void detail::gpu_float_piece(GgmlType type, const uint8_t* row, int64_t e, float* q, float& d) {
  piece(type, row, e, q, d);
}

void gpu_dot_float_rows(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t n_rows, const float* x, int64_t k,
                        float* out) {
  const Isa isa = gpu_dot_isa();
  if (isa == Isa::kAvx512 && detail::gpu_dot_float_rows_avx512(type, w, row_bytes, n_rows, x, k, out)) return;
  if (isa != Isa::kScalar && detail::gpu_dot_float_rows_avx2(type, w, row_bytes, n_rows, x, k, out)) return;
  for (int64_t r = 0; r < n_rows; ++r) out[r] = gpu_dot_float(type, w + r * row_bytes, x, k);
}

void gpu_dot_q8_rows(const GpuDotPlan& plan, GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t n_rows,
                     const GpuActQ8& x, int64_t k, float* out) {
  const Isa isa = gpu_dot_isa();
  if (isa == Isa::kAvx512 && detail::gpu_dot_q8_rows_avx512(plan, type, w, row_bytes, n_rows, x, k, out)) return;
  if (isa != Isa::kScalar && detail::gpu_dot_q8_rows_avx2(plan, type, w, row_bytes, n_rows, x, k, out)) return;
  for (int64_t r = 0; r < n_rows; ++r) out[r] = gpu_dot_q8(plan, type, w + r * row_bytes, x, k);
}

}  // namespace ft::moe_cpu
