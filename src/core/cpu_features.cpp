#include "core/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>

#include "core/error.h"

namespace ft {
namespace {

uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  // xgetbv with ecx=0; only valid when cpuid reports OSXSAVE (checked by the caller).
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const bool avx = (c >> 28) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (osxsave && avx) {
    const uint64_t xcr0 = read_xcr0();
    f.os_avx = (xcr0 & 0x6) == 0x6;
    f.os_avx512 = f.os_avx && (xcr0 & 0xe0) == 0xe0;
  }
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.bmi2 = (b >> 8) & 1;
  const bool avx2 = (b >> 5) & 1;
  f.avx2 = avx2 && f.os_avx && f.fma && f.f16c && f.bmi2;
  if (f.os_avx512) {
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vnni = (c >> 11) & 1;
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512bf16 = (a >> 5) & 1;
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool isa_supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return f.avx2;
    case Isa::kAvx512:
      // The AVX-512 kernels use F/BW/VL/DQ only (no BF16/VNNI instructions), plus AVX2.
      return f.avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  }
  return false;
}

Isa best_isa() {
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

Isa active_isa() {
  static const Isa isa = [] {
    const char* env = std::getenv("FT_ISA");
    if (env == nullptr || *env == 0) return best_isa();
    const auto forced = isa_from_name(env);
    if (!forced) fail("FT_ISA={}: expected scalar, avx2 or avx512", env);
    if (!isa_supported(*forced)) fail("FT_ISA={}: this CPU does not support it (best is {})", env, isa_name(best_isa()));
    return *forced;
  }();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

std::optional<Isa> isa_from_name(std::string_view name) {
  if (name == "scalar") return Isa::kScalar;
  if (name == "avx2") return Isa::kAvx2;
  if (name == "avx512") return Isa::kAvx512;
  return std::nullopt;
}

}  // namespace ft
