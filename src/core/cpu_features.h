// What the CPU can run, detected once with cpuid/xgetbv, and which SIMD kernel family
// to use. FT_ISA=scalar|avx2|avx512 forces a family (for tests and A/B timing); forcing
// one the CPU lacks is an error rather than a crash later.
#pragma once

#include <optional>
#include <string_view>

namespace ft {

struct CpuFeatures {
  bool avx2 = false;  // with FMA, F16C and BMI2 (the AVX2 kernels assume all four)
  bool fma = false;
  bool f16c = false;
  bool bmi2 = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512bf16 = false;
  bool avx512vnni = false;
  bool os_avx = false;     // OS saves ymm state (XCR0 bits 1,2)
  bool os_avx512 = false;  // OS saves zmm/opmask state (XCR0 bits 5,6,7)
};

// Kernel families, ordered from slowest to fastest.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

const CpuFeatures& cpu_features();
// True when this CPU (and OS) can run kernels of family `isa`.
bool isa_supported(Isa isa);
// Fastest supported family.
Isa best_isa();
// best_isa(), or FT_ISA when set (read once; throws ft::Error if unknown or unsupported).
Isa active_isa();

const char* isa_name(Isa isa);
std::optional<Isa> isa_from_name(std::string_view name);

}  // namespace ft
