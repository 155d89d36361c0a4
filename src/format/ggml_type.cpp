#include "format/ggml_type.h"

#include <array>
#include <cctype>

namespace ft {
namespace {

constexpr std::array<GgmlTypeTraits, kGgmlTypeCount> kTraits = {{
    {"f32", 1, 4},       // 0
    {"f16", 1, 2},       // 1
    {"q4_0", 32, 18},    // 2
    {"q4_1", 32, 20},    // 3
    {"", 0, 0},          // 4 removed
    {"", 0, 0},          // 5 removed
    {"q5_0", 32, 22},    // 6
    {"q5_1", 32, 24},    // 7
    {"q8_0", 32, 34},    // 8
    {"q8_1", 32, 36},    // 9
    {"q2_K", 256, 84},   // 10
    {"q3_K", 256, 110},  // 11
    {"q4_K", 256, 144},  // 12
    {"q5_K", 256, 176},  // 13
    {"q6_K", 256, 210},  // 14
    {"q8_K", 256, 292},  // 15
    {"iq2_xxs", 256, 66},
    {"iq2_xs", 256, 74},
    {"iq3_xxs", 256, 98},
    {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},
    {"iq3_s", 256, 110},
    {"iq2_s", 256, 82},
    {"iq4_xs", 256, 136},
    {"i8", 1, 1},
    {"i16", 1, 2},
    {"i32", 1, 4},
    {"i64", 1, 8},
    {"f64", 1, 8},
    {"iq1_m", 256, 56},
    {"bf16", 1, 2},  // 30
    {"", 0, 0},      // 31 removed
    {"", 0, 0},      // 32 removed
    {"", 0, 0},      // 33 removed
    {"tq1_0", 256, 54},
    {"tq2_0", 256, 66},
    {"", 0, 0},  // 36 removed
    {"", 0, 0},  // 37 removed
    {"", 0, 0},  // 38 removed
    {"mxfp4", 32, 17},
    {"nvfp4", 64, 36},
    {"q1_0", 128, 18},
    {"q2_0", 64, 18},
}};

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(int32_t id) {
  if (id < 0 || id >= kGgmlTypeCount) return std::nullopt;
  if (kTraits[static_cast<size_t>(id)].block_size == 0) return std::nullopt;
  return kTraits[static_cast<size_t>(id)];
}

const GgmlTypeTraits& traits(GgmlType t) { return kTraits[static_cast<size_t>(t)]; }

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (int32_t i = 0; i < kGgmlTypeCount; ++i) {
    const auto& tr = kTraits[static_cast<size_t>(i)];
    if (tr.block_size == 0 || tr.name.size() != name.size()) continue;
    bool eq = true;
    for (size_t k = 0; k < name.size(); ++k) {
      if (std::tolower(static_cast<unsigned char>(name[k])) !=
          std::tolower(static_cast<unsigned char>(tr.name[k]))) {
        eq = false;
        break;
      }
    }
    if (eq) return static_cast<GgmlType>(i);
  }
  return std::nullopt;
}

}  // namespace ft
