// How many mutants a robustness test runs: its default, or the environment variable's count for a long run
// (FT_SERVE_MUTANTS, FT_HF_MUTANTS, FT_ST_MUTANTS, FT_LOAD_MUTANTS, FT_TOK_MUTANTS; benches/fuzz.md).
#pragma once

#include <cstdlib>

namespace ft::test {

inline int mutant_count(const char* env, int def) {
  const char* e = std::getenv(env);
  return e != nullptr && std::atoi(e) > 0 ? std::atoi(e) : def;
}

}  // namespace ft::test
