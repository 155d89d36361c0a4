#include "quant/iq_tables.h"

#include <array>
#include <bit>
#include <cstddef>

namespace ft::quant {

// The 256 chosen points of the 8^4 IQ3 lattice, as four 3-bit codes per entry (c0 in
// bits 0-2). A format constant (ggml-quants.c, iq3xs_init_impl), not derivable.
const uint16_t kIq3xxsKgrid[256] = {
    0,    2,    4,    9,    11,   15,   16,   18,   25,   34,   59,   61,   65,   67,   72,   74,
    81,   85,   88,   90,   97,   108,  120,  128,  130,  132,  137,  144,  146,  153,  155,  159,
    169,  175,  189,  193,  199,  200,  202,  213,  248,  267,  287,  292,  303,  315,  317,  321,
    327,  346,  362,  413,  436,  456,  460,  462,  483,  497,  513,  515,  520,  522,  529,  531,
    536,  538,  540,  551,  552,  576,  578,  585,  592,  594,  641,  643,  648,  650,  657,  664,
    698,  704,  706,  720,  729,  742,  758,  769,  773,  808,  848,  852,  870,  889,  901,  978,
    992,  1024, 1026, 1033, 1035, 1040, 1042, 1046, 1049, 1058, 1089, 1091, 1093, 1096, 1098, 1105,
    1112, 1139, 1143, 1144, 1152, 1154, 1161, 1167, 1168, 1170, 1183, 1184, 1197, 1217, 1224, 1228,
    1272, 1276, 1309, 1323, 1347, 1367, 1377, 1404, 1473, 1475, 1486, 1509, 1537, 1544, 1546, 1553,
    1555, 1576, 1589, 1594, 1600, 1602, 1616, 1625, 1636, 1638, 1665, 1667, 1672, 1685, 1706, 1722,
    1737, 1755, 1816, 1831, 1850, 1856, 1862, 1874, 1901, 1932, 1950, 1971, 2011, 2032, 2052, 2063,
    2077, 2079, 2091, 2095, 2172, 2192, 2207, 2208, 2224, 2230, 2247, 2277, 2308, 2345, 2356, 2389,
    2403, 2424, 2501, 2504, 2506, 2520, 2570, 2593, 2616, 2624, 2630, 2646, 2669, 2700, 2714, 2746,
    2754, 2795, 2824, 2835, 2839, 2874, 2882, 2905, 2984, 3028, 3042, 3092, 3108, 3110, 3124, 3153,
    3185, 3215, 3252, 3288, 3294, 3364, 3397, 3434, 3483, 3523, 3537, 3587, 3589, 3591, 3592, 3610,
    3626, 3670, 3680, 3722, 3749, 3754, 3776, 3789, 3803, 3824, 3857, 3873, 3904, 3906, 3924, 3992,
};

// Code c means magnitude 2c+1 in units of 4 (i.e. 8c+4), except the top code, which
// ggml moved from 60 to 62.
const uint8_t kIq3Magnitudes[8] = {4, 12, 20, 28, 36, 44, 52, 62};

namespace {

std::array<uint32_t, 256> build_iq3xxs_grid() {
  std::array<uint32_t, 256> g{};
  for (int k = 0; k < 256; ++k) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(kIq3Magnitudes[(kIq3xxsKgrid[k] >> (3 * i)) & 7]) << (8 * i);
    g[static_cast<size_t>(k)] = v;
  }
  return g;
}

std::array<uint8_t, 128> build_ksigns() {
  std::array<uint8_t, 128> s{};
  for (unsigned k = 0; k < 128; ++k) s[k] = static_cast<uint8_t>(k | ((std::popcount(k) & 1u) << 7));
  return s;
}

}  // namespace

const uint32_t* iq3xxs_grid() {
  static const std::array<uint32_t, 256> g = build_iq3xxs_grid();
  return g.data();
}

const uint8_t* iq_ksigns() {
  static const std::array<uint8_t, 128> s = build_ksigns();
  return s.data();
}

}  // namespace ft::quant
