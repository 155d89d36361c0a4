// AVX2 Q8_0 packer: the same operations as ggml's x86 quantize_row_q8_0 (max of |x| over
// the block, d = amax / 127, id = 127 / amax, x * id rounded half-to-even), so the int8
// values are bit-identical; the block's fp16 d is stored widened to fp32.
#include <immintrin.h>

#include "quant/act_quant.h"

namespace ft::quant::detail {

void pack_act_q8_0_avx2(const float* x, void* p, int64_t k) {
  auto* qs = static_cast<int8_t*>(p);
  auto* dd = reinterpret_cast<float*>(static_cast<uint8_t*>(p) + k);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16),
           v3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f;
    dd[b] = _cvtsh_ss(_cvtss_sh(d, 0));
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m256i i0 =
        _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), _MM_FROUND_TO_NEAREST_INT));
    const __m256i i1 =
        _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), _MM_FROUND_TO_NEAREST_INT));
    const __m256i i2 =
        _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), _MM_FROUND_TO_NEAREST_INT));
    const __m256i i3 =
        _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), _MM_FROUND_TO_NEAREST_INT));
    // packs work within 128-bit lanes; the dword permutation restores element order.
    const __m256i q = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * b),
                        _mm256_permutevar8x32_epi32(q, perm));
  }
}

}  // namespace ft::quant::detail
