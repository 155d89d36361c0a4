// Scalar twin of the integer GEMV path (gemv_q8_ref.h). Independent of the kernel's
// decoders on purpose: weight codes come from the GGUF layouts written out plainly.
#include "cuda/gemv_q8_ref.h"

#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/fp16.h"
#include "cuda/check.h"
#include "cuda/act_q8.h"
#include "cuda/gemv_formats.cuh"

namespace ft::cuda {
namespace {

struct XRow {
  const int8_t* q;
  const uint8_t* ds;
  float d(int64_t b) const {
    float v;
    std::memcpy(&v, ds + 8 * b, 4);
    return v;
  }
};

XRow view(const void* xq_row, int64_t k) {
  const auto* b = static_cast<const uint8_t*>(xq_row);
  return {reinterpret_cast<const int8_t*>(b), b + k};
}

// 2 * E2M1(code), an integer in [-12, 12].
int e2m1x2(int code) {
  static const int kMag[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  return (code & 8) ? -kMag[code & 7] : kMag[code & 7];
}

float dot_nvfp4(const uint8_t* w, int64_t k, const XRow& x) {
  float acc = 0.0f;
  for (int64_t b = 0; b < k / 64; ++b) {
    const uint8_t* blk = w + 36 * b;
    for (int s = 0; s < 4; ++s) {
      int is = 0;
      for (int j = 0; j < 16; ++j) {
        const uint8_t byte = blk[4 + 8 * s + (j & 7)];
        const int code = j < 8 ? (byte & 0xF) : (byte >> 4);
        is += e2m1x2(code) * x.q[64 * b + 16 * s + j];
      }
      const float sw = gemv_detail::ue4m3_half(blk[s]);
      acc = std::fma(static_cast<float>(is), sw * x.d((64 * b + 16 * s) / 32), acc);
    }
  }
  return acc;
}

float dot_mxfp4(const uint8_t* w, int64_t k, const XRow& x) {
  float acc = 0.0f;
  for (int64_t b = 0; b < k / 32; ++b) {
    const uint8_t* blk = w + 17 * b;
    int is = 0;
    for (int j = 0; j < 32; ++j) {
      const uint8_t byte = blk[1 + (j & 15)];
      is += e2m1x2(j < 16 ? (byte & 0xF) : (byte >> 4)) * x.q[32 * b + j];
    }
    acc = std::fma(static_cast<float>(is), gemv_detail::e8m0_half(blk[0]) * x.d(b), acc);
  }
  return acc;
}

float dot_q8_0(const uint8_t* w, int64_t k, const XRow& x) {
  float acc = 0.0f;
  for (int64_t b = 0; b < k / 32; ++b) {
    const uint8_t* blk = w + 34 * b;
    int is = 0;
    for (int j = 0; j < 32; ++j) is += static_cast<int8_t>(blk[2 + j]) * x.q[32 * b + j];
    uint16_t h;
    std::memcpy(&h, blk, 2);
    acc = std::fma(static_cast<float>(is), f16_to_f32(h) * x.d(b), acc);
  }
  return acc;
}

float dot_q4_k(const uint8_t* w, int64_t k, const XRow& x) {
  float acc = 0.0f;
  for (int64_t b = 0; b < k / 256; ++b) {
    const uint8_t* blk = w + 144 * b;
    uint16_t hd, hm;
    std::memcpy(&hd, blk, 2);
    std::memcpy(&hm, blk + 2, 2);
    const float d = f16_to_f32(hd), dmin = f16_to_f32(hm);
    for (int pp = 0; pp < 4; ++pp)
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * pp + h;
        const uint8_t* s = blk + 4;
        int sc, mn;
        if (j < 4) {
          sc = s[j] & 63, mn = s[j + 4] & 63;
        } else {
          sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
        const int64_t e0 = 256 * b + 64 * pp + 32 * h;
        int is = 0, sx = 0;
        for (int l = 0; l < 32; ++l) {
          const uint8_t byte = blk[16 + 32 * pp + l];
          is += (h == 0 ? (byte & 0xF) : (byte >> 4)) * x.q[e0 + l];
          sx += x.q[e0 + l];
        }
        const float dx = x.d(e0 / 32);
        const float a = dx * static_cast<float>(sc * is);
        const float m = dx * static_cast<float>(mn * sx);
        acc = std::fma(d, a, acc);
        acc = std::fma(-dmin, m, acc);
      }
  }
  return acc;
}

float dot_q6_k(const uint8_t* w, int64_t k, const XRow& x) {
  float acc = 0.0f;
  for (int64_t b = 0; b < k / 256; ++b) {
    const uint8_t* blk = w + 210 * b;
    uint16_t hd;
    std::memcpy(&hd, blk + 208, 2);
    const float d = f16_to_f32(hd);
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 2; ++i)
        for (int qq = 0; qq < 4; ++qq) {
          int is = 0;
          const int64_t e0 = 256 * b + 128 * h + 32 * qq + 16 * i;
          for (int j = 0; j < 16; ++j) {
            const int l = 16 * i + j;
            const uint8_t ql = blk[64 * h + 32 * (qq & 1) + l];
            const uint8_t qh = blk[128 + 32 * h + l];
            const int q = (((qq >> 1) ? (ql >> 4) : (ql & 0xF)) | (((qh >> (2 * qq)) & 3) << 4)) - 32;
            is += q * x.q[e0 + j];
          }
          const int sc = static_cast<int8_t>(blk[192 + 8 * h + i + 2 * qq]);
          acc = std::fma(static_cast<float>(sc * is), d * x.d(e0 / 32), acc);
        }
  }
  return acc;
}

float round_host(Round r, float v) {
  if (r == Round::kBF16) return bf16_to_f32(f32_to_bf16(v));
  if (r == Round::kF16) return f16_to_f32(f32_to_f16(v));
  return v;
}

}  // namespace

float gemv_q8_dot_ref(GgmlType type, const uint8_t* wrow, int64_t k, const void* xq_row) {
  const XRow x = view(xq_row, k);
  switch (type) {
    case GgmlType::NVFP4: return dot_nvfp4(wrow, k, x);
    case GgmlType::MXFP4: return dot_mxfp4(wrow, k, x);
    case GgmlType::Q8_0: return dot_q8_0(wrow, k, x);
    case GgmlType::Q4_K: return dot_q4_k(wrow, k, x);
    case GgmlType::Q6_K: return dot_q6_k(wrow, k, x);
    default: fail_message("gemv_q8_dot_ref: no integer path for " + std::string(type_name(type)));
  }
}

void gemv_q8_ref(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t k, int64_t rows, const void* xq,
                 int64_t n_tok, float* y, int64_t ldy, const float* row_scale, float scale, Round round,
                 bool accumulate) {
  const int64_t xr = act_q8_row_bytes(k);
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const float dot = gemv_q8_dot_ref(type, w + r * row_bytes, k, static_cast<const uint8_t*>(xq) + t * xr);
      const float s = row_scale != nullptr ? row_scale[r] * scale : scale;
      const float v = round_host(round, dot * s);
      float& o = y[t * ldy + r];
      o = accumulate ? o + v : v;
    }
}

float act_q8_value(const void* xq_row, int64_t k, int64_t i) {
  const XRow x = view(xq_row, k);
  return x.d(i / 32) * static_cast<float>(x.q[i]);
}

}  // namespace ft::cuda
