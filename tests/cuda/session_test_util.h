// Helpers of the whole-model GPU tests against the CPU engine (gpu_session_test.cpp,
// qwen35_session_test.cpp, gpu_batch_test.cpp): generated model specs and their files,
// the dtype sweep, CPU options per --dtype, logit comparisons, and the prompt + teacher-forced
// decode comparison of a GpuSession with an engine::Session; the greedy tokens of a MoE backend
// (gemma4_session_test.cpp, moe_cpu_test.cpp).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampler.h"
#include "engine/session.h"
#include "gpu/session.h"
#include "model/model.h"
#include "testgen/model_gen.h"

namespace ft::gpu_test {

namespace fs = std::filesystem;

struct Case {
  std::string name;
  testgen::ModelSpec spec;
};

// The tiny preset of an architecture with a fixed seed; every role / the given roles in type t.
inline testgen::ModelSpec base(testgen::Arch a, uint64_t seed) { return testgen::preset_seeded("tiny", a, seed); }
inline testgen::ModelSpec all(testgen::ModelSpec s, GgmlType t) { return testgen::with_all_types(std::move(s), t); }
inline testgen::ModelSpec with(testgen::ModelSpec s, std::initializer_list<testgen::Role> roles, GgmlType t) {
  return testgen::with_types(std::move(s), roles, t);
}

// A case in one --dtype (the parameter of the TEST_Ps).
struct Param {
  Case c;
  std::string dtype;
};

inline std::vector<Param> params(const std::vector<Case>& cases, std::initializer_list<const char*> dtypes) {
  std::vector<Param> p;
  for (const Case& c : cases)
    for (const char* d : dtypes) p.push_back({c, d});
  return p;
}
inline const std::initializer_list<const char*> kAllDtypes = {"float32", "bfloat16", "float16", "auto"};

// gtest's name of a Param: name_dtype with non-alphanumerics as '_'.
inline std::string param_name(const ::testing::TestParamInfo<Param>& i) {
  std::string s = i.param.c.name + "_" + i.param.dtype;
  for (auto& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// A folder of this process under the system's temporary one.
inline fs::path test_dir(const std::string& what) {
  const fs::path dir = fs::temp_directory_path() / (what + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

// A generated model written to dir/name.gguf and loaded.
struct TestModel {
  std::string path;
  testgen::GenerateResult gen;
  std::unique_ptr<model::Model> m;
};
inline TestModel write_model(const testgen::ModelSpec& spec, const fs::path& dir, const std::string& name) {
  TestModel t;
  t.path = (dir / (name + ".gguf")).string();
  t.gen = testgen::generate_model(spec, t.path);
  t.m = model::load_model(t.path);
  return t;
}

// n tokens spread over the vocabulary.
inline std::vector<int32_t> make_prompt(int n, int64_t n_vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((53 * i + 7) % n_vocab));
  return p;
}

// The CPU engine in the --dtype the GPU runs (auto: fp32 activations with Q8 matmul inputs).
inline engine::SessionOptions cpu_options(const std::string& dtype) {
  engine::SessionOptions o;
  o.n_threads = 2;
  o.n_ctx = 128;
  if (dtype == "auto") {
    o.act = engine::ActType::kF32;
    o.act_quant = quant::ActQuant::kQ8;
  } else {
    o.act = *engine::act_type_from_name(dtype);
  }
  return o;
}

// Logit tolerance of the GPU against the CPU engine in the same dtype. fp32: summation order
// only (measured ~1e-5 on these models). Reduced precision: the rounding points are the same
// but an element rounded the other way propagates (bf16 has 8 bits). auto: the GPU rounds
// activations to Q8 in its own blocks and keeps the KV cache in f16, the CPU in fp32.
inline float session_tol(const std::string& dtype) { return dtype == "float32" ? 2e-3f : 0.5f; }
// Measured on the H200: fp32 argmaxes agree everywhere; bf16/f16/auto part only where the
// CPU's top-2 margin is below 0.25 (auto: 1 of 24 steps at a margin between 0.1 and 0.25).
inline float session_near_tie(const std::string& dtype) { return dtype == "float32" ? 1e-3f : 0.25f; }

// max |a - b| (NaN anywhere: infinity).
inline float max_abs_diff(const float* a, const float* b, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

inline float top2_margin(const float* x, int64_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > a) {
      b = a;
      a = x[i];
    } else if (x[i] > b) {
      b = x[i];
    }
  }
  return a - b;
}

struct VsCpu {
  std::vector<float> prompt_gpu;                // the GPU's prompt logits
  float prompt_diff = 0, decode_diff = 0;       // max |dlogit| (decode: prompt included)
  int agree = 0, steps = 0;                     // decode argmaxes equal
  std::vector<int32_t> forced;                  // the tokens fed (the CPU's greedy ones)
  std::vector<std::vector<float>> gpu_steps;    // the GPU's logits of each step
};

// The prompt on both sides (logits within session_tol), then `steps` teacher-forced decode
// steps on the CPU's greedy tokens: the GPU's argmax equals the CPU's wherever the CPU's top-2
// margin is not a near tie, and (but in auto, where a router near tie may pick another expert
// on one side and make the logits jump while the argmaxes agree) the logits stay within
// session_tol.
inline VsCpu compare_to_cpu(engine::Session& cpu, gpu::GpuSession& gpu, const std::vector<int32_t>& prompt, int steps,
                            const std::string& dtype) {
  const int64_t V = gpu.n_vocab();
  auto copy = [V](const float* x) { return std::vector<float>(x, x + V); };
  VsCpu r;
  const auto n = static_cast<int64_t>(prompt.size());
  const std::vector<float> lc = copy(cpu.eval(prompt.data(), n));
  r.prompt_gpu = copy(gpu.eval(prompt.data(), n));
  r.prompt_diff = max_abs_diff(lc.data(), r.prompt_gpu.data(), V);
  EXPECT_LE(r.prompt_diff, session_tol(dtype)) << "prompt logits";
  int32_t next = engine::argmax(lc.data(), static_cast<int32_t>(V));
  r.decode_diff = r.prompt_diff;
  r.steps = steps;
  for (int i = 0; i < steps; ++i) {
    r.forced.push_back(next);
    const std::vector<float> c = copy(cpu.eval(&next, 1));
    r.gpu_steps.push_back(copy(gpu.eval(&next, 1)));
    const std::vector<float>& g = r.gpu_steps.back();
    r.decode_diff = std::max(r.decode_diff, max_abs_diff(c.data(), g.data(), V));
    const int32_t ac = engine::argmax(c.data(), static_cast<int32_t>(V));
    const int32_t ag = engine::argmax(g.data(), static_cast<int32_t>(V));
    if (ac == ag) ++r.agree;
    EXPECT_TRUE(ac == ag || top2_margin(c.data(), V) < session_near_tie(dtype))
        << "step " << i << ": cpu " << ac << ", gpu " << ag << " (cpu margin " << top2_margin(c.data(), V) << ")";
    next = ac;
  }
  if (dtype != "auto") {
    EXPECT_LE(r.decode_diff, session_tol(dtype)) << "decode logits";
  }
  return r;
}

// The MoE backends held against fused: offload with a quarter of the experts cached, cpu,
// and hybrid (a quarter cached) fetching at most 0 and 2 misses per layer and step.
struct BackendVariant {
  std::string label;
  gpu::MoeBackendOptions o;
};
inline std::vector<BackendVariant> moe_backend_variants() {
  std::vector<BackendVariant> vs;
  gpu::MoeBackendOptions o;
  o.name = "offload";
  o.cache_rate = 0.25;
  vs.push_back({"offload rate 0.25", o});
  o = {};
  o.name = "cpu";
  o.threads = 2;
  vs.push_back({"cpu", o});
  o.name = "hybrid";
  o.cache_rate = 0.25;
  for (int k : {0, 2}) {
    o.hybrid_max_fetch = k;
    vs.push_back({"hybrid max-fetch " + std::to_string(k), o});
  }
  return vs;
}

// n greedy tokens after `prompt` on a GpuSession (n_ctx 320) whose experts run on the MoE backend
// `mo`; describe / stats, when given: the backend's line and its counters (format_moe_stats).
inline std::vector<int32_t> greedy_tokens(const model::Model& m, const std::string& dtype,
                                          const gpu::MoeBackendOptions& mo, const std::vector<int32_t>& prompt, int n,
                                          std::string* describe = nullptr, std::string* stats = nullptr) {
  gpu::GpuSessionOptions go;
  go.n_ctx = 320;
  go.dtype = dtype;
  go.moe = mo;
  gpu::GpuSession s(m, go);
  if (describe) *describe = s.moe().describe();
  std::vector<int32_t> out;
  int32_t t = s.eval_argmax(prompt.data(), static_cast<int64_t>(prompt.size()));
  for (int i = 0; i < n; ++i) {
    out.push_back(t);
    if (i + 1 < n) t = s.eval_argmax(&t, 1);
  }
  if (stats) *stats = gpu::format_moe_stats(s.moe().stats());
  return out;
}

// How many leading tokens two runs share.
inline int same_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  int i = 0;
  while (i < static_cast<int>(a.size()) && i < static_cast<int>(b.size()) && a[i] == b[i]) ++i;
  return i;
}

}  // namespace ft::gpu_test
