#include "gpu/debug_skip.h"

#include <cstdlib>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/log.h"

namespace ft::gpu::debug {
namespace {

// Parsed on the first skip() (inside a command, whose handler reports a bad name and exits 1), not
// at static initialisation, where a throw aborted the process before main.
// garbage: the links are left out, so the tokens are garbage (FT_DEBUG_SKIP), and the run says so.
unsigned parse_links(const char* var, bool garbage) {
  const char* e = std::getenv(var);
  if (e == nullptr) return 0u;
  static constexpr const char* kNames[] = {"norm1",  "qkv",    "attn",    "wo",    "norm2",      "gateup",
                                           "swiglu", "down",   "router",  "experts", "route", "moe_swiglu"};
  unsigned m = 0;
  std::string s(e);
  for (size_t a = 0; a <= s.size();) {
    const size_t b = std::min(s.find(',', a), s.size());
    const std::string name = s.substr(a, b - a);
    bool known = false;
    for (unsigned i = 0; i < std::size(kNames); ++i)
      if (name == kNames[i]) m |= 1u << i, known = true;
    if (!known && !name.empty()) fail("{}: unknown link '{}'", var, name);
    a = b + 1;
  }
  if (m != 0 && garbage) log::warn("{}={}: decode steps skip launches, tokens are garbage", var, e);
  return m;
}

}  // namespace

bool skip(unsigned link, int64_t n_tok) {
  static const unsigned mask = parse_links("FT_DEBUG_SKIP", true);
  return (mask & link) != 0 && n_tok == 1;
}

bool spacer(unsigned link, int64_t n_tok) {
  static const unsigned mask = parse_links("FT_DEBUG_SPACER", false);
  return (mask & link) != 0 && n_tok == 1;
}

}  // namespace ft::gpu::debug
