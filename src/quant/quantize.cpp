#include "quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"

namespace ft::quant {
namespace {

// Doubled E2M1 values, as in ggml (kvalues_mxfp4): code -> 2*E2M1(code).
constexpr int8_t kKV[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ggml's nearest_int: round half to even (the 1.5*2^23 trick under the default FP mode).
int nearest_int(float v) { return static_cast<int>(std::nearbyint(v)); }

void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}
float get_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// 2^(e-128): the MXFP4 block scale halved (doubled code table).
float e8m0_half(uint8_t e) {
  if (e < 2) return e == 0 ? std::ldexp(1.0f, -128) : std::ldexp(1.0f, -127);
  return bits_to_f32(static_cast<uint32_t>(e - 1) << 23);
}

// ---- Q8_0: d = amax/127, q = round-half-away(x/d) ---------------------------------
void quantize_q8_0(const float* x, uint8_t* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32, y += 34) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(y, d);
    for (int j = 0; j < 32; ++j) y[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
  }
}

// ---- Q4_0: d = (signed max)/-8, q = min(15, trunc(x/d + 8.5)) --------------------
void quantize_q4_0(const float* x, uint8_t* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32, y += 18) {
    float amax = 0, vmax = 0;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        vmax = x[j];
      }
    }
    const float d = vmax / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    put_f16(y, d);
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      y[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// ---- MXFP4: e = floor(log2 amax) - 2 + 127, nearest code (ties -> lowest index) ---
int best_fp4_index(float x, float d) {
  int best = 0;
  float best_err = std::fabs(kKV[0] * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kKV[i] * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

void quantize_mxfp4(const float* x, uint8_t* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32, y += 17) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    int e = 0;
    if (amax > 0) e = std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 0, 254);
    const float d = e8m0_half(static_cast<uint8_t>(e));
    y[0] = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j)
      y[1 + j] = static_cast<uint8_t>(best_fp4_index(x[j], d) | (best_fp4_index(x[j + 16], d) << 4));
  }
}

// ---- NVFP4 with second-level scale (nvfp4-scales.md §6.1) -------------------------
void quantize_nvfp4(const float* x, uint8_t* y, int64_t n, float s2) {
  for (int64_t b = 0; b < n / 64; ++b, x += 64, y += 36) {
    for (int s = 0; s < 4; ++s) {
      const float* xs = x + 16 * s;
      float amax = 0;
      for (int k = 0; k < 16; ++k) amax = std::max(amax, std::fabs(xs[k]));
      const float sb = amax / (6.0f * s2);
      const uint8_t dcod = e4m3_encode_rne(std::min(sb, 448.0f));
      const float S = e4m3_value(dcod) * s2;
      uint8_t codes[16];
      for (int k = 0; k < 16; ++k) codes[k] = S > 0 ? e2m1_encode_rne(xs[k] / S) : 0;
      y[s] = dcod;
      for (int j = 0; j < 8; ++j) y[4 + 8 * s + j] = static_cast<uint8_t>(codes[j] | (codes[j + 8] << 4));
    }
  }
}

// ---- Q4_K: per 32-group affine (scale, min) search, then 6-bit super-quantisation --
// Weighted least-squares fit of x ~ scale*L - min over a few candidate inverse
// scales (ggml's make_qkx2_quants rule with rmin=-1, rdelta=0.1, nstep=20).
float fit_scale_min(const float* x, const float* w, uint8_t* L, float* the_min) {
  constexpr int n = 32, nmax = 15;
  float lo = x[0], hi = x[0], sum_w = 0, sum_x = 0;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *the_min = -lo;
    return 0;
  }
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale;
  float best_err = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax));
    const float diff = scale * L[i] + lo - x[i];
    best_err += w[i] * diff * diff;
  }
  uint8_t aux[n];
  for (int step = 0; step <= 20; ++step) {
    iscale = (-1.0f + 0.1f * step + nmax) / (hi - lo);
    float sl = 0, sl2 = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      sl += w[i] * l;
      sl2 += w[i] * l * l;
      sxl += w[i] * l * x[i];
    }
    const float D = sum_w * sl2 - sl * sl;
    if (D <= 0) continue;
    float this_scale = (sum_w * sxl - sum_x * sl) / D;
    float this_min = (sl2 * sum_x - sl * sxl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sxl / sl2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * aux[i] + this_min - x[i];
      err += w[i] * diff * diff;
    }
    if (err < best_err) {
      std::copy(aux, aux + n, L);
      best_err = err;
      scale = this_scale;
      lo = this_min;
    }
  }
  *the_min = -lo;
  return scale;
}

void q4k_scale_min(const uint8_t* sc, int j, int* d, int* m) {
  if (j < 4) {
    *d = sc[j] & 63;
    *m = sc[j + 4] & 63;
  } else {
    *d = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
    *m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
}

void quantize_q4_k(const float* x, uint8_t* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b, x += 256, y += 144) {
    uint8_t L[256];
    float scales[8], mins[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) w[l] = av + std::fabs(x[32 * j + l]);
      scales[j] = fit_scale_min(x + 32 * j, w, L + 32 * j, &mins[j]);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t* sc = y + 4;
    std::memset(sc, 0, 12);
    for (int j = 0; j < 8; ++j) {
      const uint8_t ls = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
      const uint8_t lm = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
      if (j < 4) {
        sc[j] = ls;
        sc[j + 4] = lm;
      } else {
        sc[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        sc[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        sc[j] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    put_f16(y, max_scale / 63.f);
    put_f16(y + 2, max_min / 63.f);
    const float d_all = get_f16(y), dmin_all = get_f16(y + 2);
    // Requantise against the rounded 6-bit scales and f16 super-scales.
    for (int j = 0; j < 8; ++j) {
      int is, im;
      q4k_scale_min(sc, j, &is, &im);
      const float d = d_all * is;
      if (d == 0) continue;
      const float dm = dmin_all * im;
      for (int l = 0; l < 32; ++l) L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + l] + dm) / d), 0, 15));
    }
    uint8_t* q = y + 16;
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) q[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

// ---- Q6_K: per-16 symmetric scale search (ggml's make_qx_quants, rmse_type 1) -----
float fit_symmetric(const float* x, int8_t* L) {
  constexpr int n = 16, nmax = 32;
  float amax = 0, vmax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  }
  if (amax < 1e-15f) {
    std::fill(L, L + n, 0);
    return 0;
  }
  auto eval = [&](float iscale, float* sumlx, float* suml2) {
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      *sumlx += w * x[i] * l;
      *suml2 += w * l * l;
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<int8_t>(nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
  };
  float iscale = -nmax / vmax;
  float sumlx, suml2;
  eval(iscale, &sumlx, &suml2);
  assign(iscale);
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / vmax;
    eval(iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      assign(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void quantize_q6_k(const float* x, uint8_t* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b, x += 256, y += 210) {
    int8_t L[256];
    float scales[16];
    float max_scale = 0, max_abs = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = fit_symmetric(x + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs) {
        max_abs = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    std::memset(y, 0, 210);
    if (max_abs < 1e-15f) continue;
    const float iscale = -128.f / max_scale;
    put_f16(y + 208, 1 / iscale);
    const float d_all = get_f16(y + 208);
    int8_t* sc = reinterpret_cast<int8_t*>(y + 192);
    for (int ib = 0; ib < 16; ++ib) sc[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * sc[j];
      if (d == 0) continue;
      for (int i = 0; i < 16; ++i) L[16 * j + i] = static_cast<int8_t>(32 + std::clamp(nearest_int(x[16 * j + i] / d), -32, 31));
    }
    uint8_t* ql = y;
    uint8_t* qh = y + 128;
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32) {
      const int8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

}  // namespace

uint8_t e4m3_encode_rne(float v) {
  if (!(v > 0)) return 0;
  if (v >= 448.0f) return 0x7E;
  int e2;
  std::frexp(v, &e2);  // v = f * 2^e2, f in [0.5, 1)
  int E = e2 - 1 + 7;  // biased exponent of v
  if (E <= 0) {        // subnormal: M * 2^-9
    const int M = static_cast<int>(std::nearbyint(v * 512.0f));
    return static_cast<uint8_t>(M);  // M == 8 is exactly 0x08 = 2^-6 (normal)
  }
  int M = static_cast<int>(std::nearbyint((std::ldexp(v, 7 - E) - 1.0f) * 8.0f));
  if (M == 8) {
    M = 0;
    ++E;
  }
  if (E > 15 || (E == 15 && M == 7)) return 0x7E;
  return static_cast<uint8_t>((E << 3) | M);
}

float e4m3_value(uint8_t code) {
  const int E = (code >> 3) & 15, M = code & 7;
  if (E == 0) return std::ldexp(static_cast<float>(M), -9);
  return std::ldexp(1.0f + M / 8.0f, E - 7);
}

uint8_t e2m1_encode_rne(float v) {
  static constexpr float kVal[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  const float a = std::fabs(v);
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    const float d_new = std::fabs(kVal[c] - a), d_old = std::fabs(kVal[best] - a);
    if (d_new < d_old || (d_new == d_old && (c & 1) == 0)) best = c;
  }
  if (best == 0) return 0;
  return static_cast<uint8_t>(best | (v < 0 ? 8 : 0));
}

bool has_ref_quant(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
    case GgmlType::MXFP4:
    case GgmlType::NVFP4:
      return true;
    default:
      return false;
  }
}

void quantize_row_ref(GgmlType t, const float* x, void* dst, int64_t n, float nvfp4_s2) {
  const auto& tr = traits(t);
  if (!has_ref_quant(t)) fail("quantize_row_ref: no reference quantiser for type {}", tr.name);
  if (n % tr.block_size != 0)
    fail("quantize_row_ref: row of {} elements is not a multiple of {}'s block size {}", n, tr.name,
         tr.block_size);
  auto* y = static_cast<uint8_t*>(dst);
  switch (t) {
    case GgmlType::F32:
      std::memcpy(y, x, static_cast<size_t>(n) * 4);
      break;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) put_f16(y + 2 * i, x[i]);
      break;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
      break;
    case GgmlType::Q4_0: quantize_q4_0(x, y, n); break;
    case GgmlType::Q8_0: quantize_q8_0(x, y, n); break;
    case GgmlType::Q4_K: quantize_q4_k(x, y, n); break;
    case GgmlType::Q6_K: quantize_q6_k(x, y, n); break;
    case GgmlType::MXFP4: quantize_mxfp4(x, y, n); break;
    case GgmlType::NVFP4:
      if (!(nvfp4_s2 > 0) || !std::isfinite(nvfp4_s2)) fail("quantize_row_ref: NVFP4 second-level scale {} is not a positive finite number", nvfp4_s2);
      quantize_nvfp4(x, y, n, nvfp4_s2);
      break;
    default: break;
  }
}

std::vector<uint8_t> quantize_rows_ref(GgmlType t, const float* src, int64_t rows, int64_t n, float s2) {
  const int64_t rb = row_bytes(t, n);
  std::vector<uint8_t> out(static_cast<size_t>(rb * rows));
  for (int64_t r = 0; r < rows; ++r) quantize_row_ref(t, src + r * n, out.data() + r * rb, n, s2);
  return out;
}

float nvfp4_tensor_scale(const float* x, int64_t n) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0) return 1.0f;
  return amax / 2688.0f;
}

}  // namespace ft::quant
