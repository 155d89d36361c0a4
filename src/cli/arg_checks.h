// Validators for numeric options, one wording for every subcommand. CLI::Range lets NaN through (each comparison
// with NaN is false); these refuse it and name the range. The sampling ranges are the server's request fields'
// (serve/api_params.cpp read_sampling), so `ft generate` and `ft serve` accept the same values.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>
#include <string>

namespace ft::cli {

// A finite number in [lo, hi].
inline CLI::Validator finite_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        double v = 0.0;
        try {
          size_t used = 0;
          v = std::stod(s, &used);
          if (used != s.size()) return fmt::format("'{}' is not a number", s);
        } catch (const std::exception&) {
          return fmt::format("'{}' is not a number", s);
        }
        if (!std::isfinite(v) || v < lo || v > hi) return fmt::format("{} is not in [{}, {}]", s, lo, hi);
        return "";
      },
      fmt::format("in [{}, {}]", lo, hi));
}

// Sampling options' ranges (temperature and repeat penalty up to 100, as the server's).
inline CLI::Validator temperature_range() { return finite_in(0.0, 100.0); }
inline CLI::Validator probability_range() { return finite_in(0.0, 1.0); }
inline CLI::Validator penalty_range() { return finite_in(0.0, 100.0); }
// A count (top-k): 0 to INT32_MAX.
inline CLI::Validator count_range() { return finite_in(0.0, 2147483647.0); }
// Threads: 0 (the physical cores) to 1,024. Why a bound: `--threads 100000` spawned threads until the run was killed.
inline CLI::Validator threads_range() { return finite_in(0.0, 1024.0); }

}  // namespace ft::cli
