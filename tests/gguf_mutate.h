// Mutations of a GGUF that parses but lies, for robustness tests of the loaders and the engines above the GGUF
// parser (tests/model/load_fuzz_test.cpp on the CPU, tests/cuda/gpu_load_fuzz_test.cpp on the GPU): a metadata key
// given another type or an edge value (0, -1, 2^40, NaN, inf, an empty array), a key or a tensor dropped, a
// dimension changed, a tensor's type changed (the data resized to match, so the file stays valid GGUF).
// run_load_fuzz drives one architecture's tiny model through N mutants and an outcome function.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mutants.h"
#include "core/error.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "testgen/model_gen.h"

namespace ft::test::gguf_mutate {

using gguf::Value;
using gguf::ValueType;

// FT_LOAD_MUTANTS=N, else def.
inline int mutants(int def) { return mutant_count("FT_LOAD_MUTANTS", def); }

inline Value scalar_u(ValueType t, uint64_t u) {
  Value v;
  v.type = t;
  v.u = u;
  return v;
}
inline Value scalar_i(ValueType t, int64_t i) {
  Value v;
  v.type = t;
  v.i = i;
  return v;
}
inline Value scalar_f(double f) {
  Value v;
  v.type = ValueType::FLOAT32;
  v.f = f;
  return v;
}
inline Value text(std::string s) {
  Value v;
  v.type = ValueType::STRING;
  v.str = std::move(s);
  return v;
}

// A value of another type or at an edge of the ranges the loader reads.
inline Value edge_value(std::mt19937& rng, const Value& old) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (std::uniform_int_distribution<int>(0, 13)(rng)) {
    case 0: return scalar_u(ValueType::UINT32, 0);
    case 1: return scalar_i(ValueType::INT32, -1);
    case 2: return scalar_u(ValueType::UINT64, uint64_t{1} << 40);
    case 3: return scalar_u(ValueType::UINT32, 0xFFFFFFFFu);
    case 4: return scalar_f(std::numeric_limits<double>::quiet_NaN());
    case 5: return scalar_f(std::uniform_int_distribution<int>(0, 1)(rng) ? inf : -inf);
    case 6: return scalar_f(-1.0);
    case 7: return text("x");
    case 8: {
      Value b;
      b.type = ValueType::BOOL;
      b.b = true;
      return b;
    }
    case 9: {  // an empty array of the old element type (or u32)
      Value a;
      a.type = ValueType::ARRAY;
      a.elem_type = old.is_array() ? old.elem_type : ValueType::UINT32;
      return a;
    }
    case 10: {  // an array where a scalar was, or a shorter array
      Value a;
      a.type = ValueType::ARRAY;
      if (old.is_array() && !old.arr.empty()) {
        a.elem_type = old.elem_type;
        a.arr.assign(old.arr.begin(), old.arr.begin() + static_cast<std::ptrdiff_t>(old.arr.size() / 2));
      } else {
        a.elem_type = old.type == ValueType::ARRAY ? ValueType::UINT32 : old.type;
        a.arr = {old, old};
      }
      return a;
    }
    case 11: {  // the old integer doubled, or plus one
      Value v = old;
      if (v.type == ValueType::UINT32 || v.type == ValueType::UINT64) v.u = std::uniform_int_distribution<int>(0, 1)(rng) ? v.u * 2 : v.u + 1;
      if (v.type == ValueType::INT32 || v.type == ValueType::INT64) v.i = std::uniform_int_distribution<int>(0, 1)(rng) ? v.i * 2 : v.i + 1;
      if (v.is_float()) v.f *= 1e30;
      return v;
    }
    case 12: return scalar_u(ValueType::UINT32, 1);
    default: return scalar_f(0.0);
  }
}

struct Doc {
  std::vector<std::pair<std::string, Value>> kv;
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<Tensor> tensors;
};

inline Doc read_doc(const std::string& path) {
  auto f = gguf::File::open(path);
  Doc d;
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment") d.kv.emplace_back(k, v);
  for (const auto& t : f->tensors())
    d.tensors.push_back({t.name, t.type, std::vector<int64_t>(t.ne, t.ne + std::max(1, t.n_dims)),
                         std::vector<uint8_t>(t.data, t.data + t.nbytes)});
  return d;
}

// The tensor's data resized to its (new) shape and type; false when the shape cannot be stored (a row not whole
// blocks, a negative or huge size).
inline bool refit(Doc::Tensor& t, bool retype) {
  int64_t n = 1;
  for (int64_t d : t.ne) {
    if (d <= 0 || d > (int64_t{1} << 20)) return false;
    n *= d;
    if (n > (int64_t{1} << 24)) return false;
  }
  if (traits(t.type).block_size <= 0 || t.ne[0] % traits(t.type).block_size != 0) return false;
  // 0x11 bytes are small finite values in every type (f32 1.1e-28, f16 / bf16 ~6e-4 / ~1e-28, a Q8_0 or NVFP4
  // block of small scales): a type change's data must not be NaN weights, garbage in that no loader checks.
  if (retype) t.data.assign(t.data.size(), 0x11);
  t.data.resize(static_cast<size_t>(row_bytes(t.type, t.ne[0]) * (n / t.ne[0])), 0x11);
  return true;
}

// One or two mutations; a description of them.
inline std::string mutate(Doc& d, std::mt19937& rng) {
  std::string what;
  const int k = std::uniform_int_distribution<int>(1, 2)(rng);
  for (int m = 0; m < k; ++m) {
    const int op = std::uniform_int_distribution<int>(0, 9)(rng);
    if (op <= 4 && !d.kv.empty()) {  // a key's value
      auto& [key, v] = d.kv[std::uniform_int_distribution<size_t>(0, d.kv.size() - 1)(rng)];
      v = edge_value(rng, v);
      what += "kv " + key + " = " + v.to_string(4) + "; ";
    } else if (op == 5 && !d.kv.empty()) {  // a key dropped
      const size_t i = std::uniform_int_distribution<size_t>(0, d.kv.size() - 1)(rng);
      what += "kv " + d.kv[i].first + " dropped; ";
      d.kv.erase(d.kv.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 6 && !d.tensors.empty()) {  // a tensor dropped
      const size_t i = std::uniform_int_distribution<size_t>(0, d.tensors.size() - 1)(rng);
      what += "tensor " + d.tensors[i].name + " dropped; ";
      d.tensors.erase(d.tensors.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op <= 8 && !d.tensors.empty()) {  // a dimension changed (or one added)
      auto& t = d.tensors[std::uniform_int_distribution<size_t>(0, d.tensors.size() - 1)(rng)];
      const Doc::Tensor keep = t;
      const size_t dim = std::uniform_int_distribution<size_t>(0, t.ne.size())(rng);
      if (dim == t.ne.size()) {
        if (t.ne.size() < 4) t.ne.push_back(2);
      } else {
        const int64_t choices[] = {t.ne[dim] * 2, t.ne[dim] / 2, t.ne[dim] + 32, 1, 256};
        t.ne[dim] = choices[std::uniform_int_distribution<int>(0, 4)(rng)];
      }
      if (!refit(t, false)) {
        t = keep;
        continue;
      }
      what += "tensor " + t.name + " shape " + std::to_string(t.ne[0]) + "x" + std::to_string(t.ne.size() > 1 ? t.ne[1] : 1) + "...; ";
    } else if (!d.tensors.empty()) {  // a type changed
      auto& t = d.tensors[std::uniform_int_distribution<size_t>(0, d.tensors.size() - 1)(rng)];
      const Doc::Tensor keep = t;
      const GgmlType types[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::NVFP4, GgmlType::I32};
      t.type = types[std::uniform_int_distribution<int>(0, 5)(rng)];
      if (!refit(t, true)) {
        t = keep;
        continue;
      }
      what += "tensor " + t.name + " type " + std::string(type_name(t.type)) + "; ";
    }
  }
  return what;
}

// Writes N mutants of `src` (a tiny model of one architecture) to `dst` and runs `outcome` on each: "" when the
// file loads and decodes (or is refused with ft::Error), else what went wrong -- a test failure naming the mutant.
// outcome sets *decoded when it decoded; both outcomes must occur (mutants reach the forward pass).
inline void run_load_fuzz(const std::string& src, const std::string& dst, unsigned seed, int n,
                          const std::function<std::string(const std::string&, int*)>& outcome) {
  ASSERT_EQ(outcome(src, nullptr), "") << src;
  const Doc base = read_doc(src);
  std::mt19937 rng(seed);
  int failures = 0, decoded = 0, tried = 0;
  for (int i = 0; i < n && failures < 8; ++i) {
    Doc d = base;
    const std::string what = mutate(d, rng);
    try {
      gguf::Writer w;
      for (const auto& [k, v] : d.kv) w.set(k, v);
      for (const auto& t : d.tensors) w.add_tensor(t.name, t.type, t.ne, t.data);
      w.write(dst);
    } catch (const Error&) {
      continue;  // a value the writer refuses is no file
    }
    // Printed before the run, so a crash names its mutant.
    std::fprintf(stderr, "mutant %d: %s\n", i, what.c_str());
    ++tried;
    const std::string o = outcome(dst, &decoded);
    if (!o.empty()) {
      ++failures;
      ADD_FAILURE() << "mutant " << i << ": " << what << "\n-> " << o;
    }
  }
  std::printf("%d mutants: %d decoded, %d refused\n", tried, decoded, tried - decoded);
  EXPECT_GT(decoded, 0);
  EXPECT_GT(tried - decoded, 0);
}

inline std::string arch_name(const ::testing::TestParamInfo<testgen::Arch>& info) {
  static const char* const kNames[] = {"llama", "qwen3", "qwen3moe", "gemma4", "qwen35", "qwen35moe"};
  return kNames[static_cast<int>(info.param)];
}

}  // namespace ft::test::gguf_mutate
