// Lookup tables of the IQ* formats, built from their defining constants at start-up.
// See shared/spec/gguf-format.md §3.7.
#pragma once

#include <cstdint>

namespace ft::quant {

// IQ3_XXS: 256 grid points of 4 magnitudes each; byte i of entry k is
// kIq3Magnitudes[(kIq3xxsKgrid[k] >> 3i) & 7] (ggml's iq3xxs_grid).
extern const uint16_t kIq3xxsKgrid[256];
extern const uint8_t kIq3Magnitudes[8];  // {4, 12, 20, 28, 36, 44, 52, 62}
const uint32_t* iq3xxs_grid();           // 256 entries

// 7 sign bits + even-parity 8th bit (ggml's ksigns_iq2xs): k | (popcount(k) & 1) << 7.
const uint8_t* iq_ksigns();  // 128 entries

}  // namespace ft::quant
