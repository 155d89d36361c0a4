// The CPU oracle tests compare our CPU engine with llama.cpp's CPU build down to the bit
// (drift_probe_test's op view) or within near-tie tolerances (parity rule (b)); both were
// set where both sides ran their AVX2 kernels. On an AVX-512 machine ggml loads its
// AVX-512 variant (zen4, skylakex, ...) and we take our AVX-512 rows, whose fp32 sums run
// in other orders (session 9's dev host, a Zen 5: the drift probe's op view parted from
// llama.cpp in 4 models and two qwen35 parity configs exceeded rule (b), while FT_ISA=avx2
// with ggml's haswell variant passes). So where the CPU has AVX-512, these tests pin both
// sides to AVX2: FT_ISA=avx2 (unless FT_ISA is set) for our engine, in-process and in the
// `ft` / `llama-oracle` processes they start, and FT_LLAMA_LIB_DIR to a folder that holds
// only ggml's haswell CPU variant. Our AVX-512 rows are held to their scalar twins by
// tests/quant and tests/moe_cpu instead. Not done for FT_PARITY_DEVICE=cuda (the GPU side
// takes no CPU kernels; the device runs keep the oracle they were measured with).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "core/cpu_features.h"

namespace ft::oracle_test {

inline bool pin_cpu_oracle_to_avx2() {
  const char* dev = std::getenv("FT_PARITY_DEVICE");
  if (dev != nullptr && std::strcmp(dev, "cpu") != 0) return false;
  if (ft::best_isa() != ft::Isa::kAvx512) return false;
  setenv("FT_ISA", "avx2", /*overwrite=*/0);
  const char* env = std::getenv("FT_LLAMA_LIB_DIR");
  const std::filesystem::path src = std::filesystem::path(env && *env ? env : FT_LLAMA_LIB_DIR) /
                                    "libggml-cpu-haswell.so";
  if (!std::filesystem::exists(src)) return false;
  const auto dir = std::filesystem::temp_directory_path() / ("ft-oracle-avx2-" + std::to_string(::getpid()));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::filesystem::create_symlink(std::filesystem::absolute(src), dir / src.filename(), ec);
  if (!std::filesystem::exists(dir / src.filename())) return false;
  setenv("FT_LLAMA_LIB_DIR", dir.c_str(), 1);
  std::atexit([] {
    std::error_code e;
    std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                    ("ft-oracle-avx2-" + std::to_string(::getpid())), e);
  });
  return true;
}

// Set before main(): the engine reads FT_ISA once, at its first kernel choice.
inline const bool kCpuOraclePinned = pin_cpu_oracle_to_avx2();

}  // namespace ft::oracle_test
