#include "hf/nvfp4_pack.h"

namespace ft::hf {

void nvfp4_repack_modelopt(const uint8_t* weight, const uint8_t* weight_scale, int64_t rows, int64_t k,
                           uint8_t* dst) {
  const int64_t nb = k / 64;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* w = weight + r * (k / 2);
    const uint8_t* s = weight_scale + r * (k / 16);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = dst + (r * nb + b) * 36;
      for (int g = 0; g < 4; ++g) {
        const int64_t grp = b * 4 + g;
        out[g] = s[grp] & 0x7F;
        uint8_t code[16];
        for (int i = 0; i < 8; ++i) {
          const uint8_t byte = w[grp * 8 + i];
          code[2 * i] = byte & 0xF;
          code[2 * i + 1] = byte >> 4;
        }
        for (int j = 0; j < 8; ++j) out[4 + g * 8 + j] = static_cast<uint8_t>(code[j] | (code[j + 8] << 4));
      }
    }
  }
}

void nvfp4_unpack_to_modelopt(const uint8_t* blocks, int64_t rows, int64_t k, uint8_t* weight,
                              uint8_t* weight_scale) {
  const int64_t nb = k / 64;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* w = weight + r * (k / 2);
    uint8_t* s = weight_scale + r * (k / 16);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* in = blocks + (r * nb + b) * 36;
      for (int g = 0; g < 4; ++g) {
        const int64_t grp = b * 4 + g;
        s[grp] = in[g];
        uint8_t code[16];
        for (int j = 0; j < 8; ++j) {
          code[j] = in[4 + g * 8 + j] & 0xF;
          code[j + 8] = in[4 + g * 8 + j] >> 4;
        }
        for (int i = 0; i < 8; ++i) w[grp * 8 + i] = static_cast<uint8_t>(code[2 * i] | (code[2 * i + 1] << 4));
      }
    }
  }
}

}  // namespace ft::hf
