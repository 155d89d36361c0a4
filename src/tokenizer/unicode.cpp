#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <array>
#include <memory>

namespace ft::tok {
namespace {

constexpr uint32_t kMaxCpt = 0x110000;

uint16_t flags_from_category(utf8proc_category_t c) {
  switch (c) {
    case UTF8PROC_CATEGORY_CN: return kUndefined;
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return kLetter;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME: return kMark;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return kNumber;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO: return kPunctuation;
    case UTF8PROC_CATEGORY_SM:
    case UTF8PROC_CATEGORY_SC:
    case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO: return kSymbol;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: return kSeparator;
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: return kControl;
  }
  return kUndefined;
}

// One flat table (2.2 MB, built once: 40 ms measured on the dev box) because the splitters look up
// every code point of every prompt; a utf8proc call per code point costs a
// few table indirections more and the overrides below would sit on the hot path.
std::unique_ptr<std::array<uint16_t, kMaxCpt>> build_flags_table() {
  auto t = std::make_unique<std::array<uint16_t, kMaxCpt>>();
  for (uint32_t c = 0; c < kMaxCpt; ++c) {
    (*t)[c] = flags_from_category(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
  }
  // utf8proc 2.8 (Debian 12) knows Unicode 15.0; llama.cpp's tables are from
  // Unicode 15.1, which added CJK Extension I (Lo) and five ideographic
  // description characters (So). Only fill them in where utf8proc says Cn, so a
  // newer utf8proc is left alone.
  auto set_if_unassigned = [&](uint32_t lo, uint32_t hi, uint16_t f) {
    for (uint32_t c = lo; c <= hi; ++c) {
      if ((*t)[c] == kUndefined) (*t)[c] = f;
    }
  };
  set_if_unassigned(0x2EBF0, 0x2EE5D, kLetter);
  set_if_unassigned(0x2FFC, 0x2FFF, kSymbol);
  set_if_unassigned(0x31EF, 0x31EF, kSymbol);
  // Unicode White_Space, which is what llama.cpp's matchers use for \s
  // (0x1C..0x1F, which Python's isspace accepts, are not in it).
  static constexpr uint32_t kWhite[] = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                                        0xA0,   0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  for (uint32_t c : kWhite) (*t)[c] |= kWhitespace;
  for (uint32_t c = 0x2000; c <= 0x200A; ++c) (*t)[c] |= kWhitespace;
  return t;
}

const std::array<uint16_t, kMaxCpt>& flags_table() {
  static const auto table = build_flags_table();
  return *table;
}

struct ByteTables {
  std::string to_unicode[256];
  int16_t from_cpt[0x200];  // every mapped code point is below U+0144
};

ByteTables build_byte_tables() {
  ByteTables t;
  for (auto& v : t.from_cpt) v = -1;
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const uint32_t cpt = printable ? static_cast<uint32_t>(b) : 0x100u + static_cast<uint32_t>(next++);
    append_utf8(t.to_unicode[b], cpt);
    t.from_cpt[cpt] = static_cast<int16_t>(b);
  }
  return t;
}

const ByteTables& byte_tables() {
  static const ByteTables t = build_byte_tables();
  return t;
}

}  // namespace

uint16_t cpt_flags(uint32_t cpt) {
  if (cpt >= kMaxCpt) return kUndefined;
  return flags_table()[cpt];
}

std::vector<uint32_t> utf8_to_cpts(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  auto cont = [&](size_t k) { return (p[k] & 0xC0) == 0x80; };
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      out.push_back(b);
      i += 1;
    } else if ((b & 0xE0) == 0xC0 && i + 1 < n && cont(i + 1)) {
      out.push_back((uint32_t(b & 0x1F) << 6) | (p[i + 1] & 0x3F));
      i += 2;
    } else if ((b & 0xF0) == 0xE0 && i + 2 < n && cont(i + 1) && cont(i + 2)) {
      out.push_back((uint32_t(b & 0x0F) << 12) | (uint32_t(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F));
      i += 3;
    } else if ((b & 0xF8) == 0xF0 && i + 3 < n && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      const uint32_t c = (uint32_t(b & 0x07) << 18) | (uint32_t(p[i + 1] & 0x3F) << 12) |
                         (uint32_t(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
      if (c < kMaxCpt) {
        out.push_back(c);
        i += 4;
      } else {
        out.push_back(0xFFFD);
        i += 1;
      }
    } else {
      out.push_back(0xFFFD);
      i += 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

const std::string& byte_to_unicode(uint8_t b) { return byte_tables().to_unicode[b]; }

int unicode_to_byte(uint32_t cpt) {
  if (cpt >= 0x200) return -1;
  return byte_tables().from_cpt[cpt];
}

}  // namespace ft::tok
