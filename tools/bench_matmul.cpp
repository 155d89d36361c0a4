// ft-bench-matmul: single-thread timing of the CPU matmul kernels, per weight type,
// shape and token count, as GB/s of weight bytes read and GFLOP/s. Optionally times
// ggml's CPU dot products on the same data (llama.cpp's path: activations quantised to
// the type's vec_dot_type, then one vec_dot per row and token) for comparison.
//   ft-bench-matmul --types q4_K,nvfp4 --shapes 4096x4096 --ntok 1,64
//   ft-bench-matmul --ggml-cpu-lib .deps/llama/lib/libggml-cpu-haswell.so
//   ft-bench-matmul --act q8      (the q8 route only; default: both routes, "avx2" and "avx2-q8")
// Shapes are ROWSxK (output rows x input length). Weights are cycled through enough
// copies to exceed the last-level cache, so GEMV numbers are DRAM numbers.
#include <CLI/CLI.hpp>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/matmul.h"

namespace {

using ft::GgmlType;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = s.find(sep, i);
    std::string part = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (!part.empty()) out.push_back(part);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

void put_f16(uint8_t* p, float v) {
  const uint16_t h = ft::f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Random payload with sane scale fields (no inf/NaN/subnormal scales, which would time
// the CPU's slow paths instead of the kernel).
std::vector<uint8_t> make_weights(GgmlType t, int64_t rows, int64_t k, std::mt19937& rng) {
  const auto& tr = ft::traits(t);
  std::vector<uint8_t> w(static_cast<size_t>(rows * ft::row_bytes(t, k)));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const int64_t nb = static_cast<int64_t>(w.size()) / tr.type_size;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* b = w.data() + i * tr.type_size;
    switch (t) {
      case GgmlType::F32: {
        const float v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
        std::memcpy(b, &v, 4);
        break;
      }
      case GgmlType::F16:
        put_f16(b, static_cast<float>(rng() % 2001) / 1000.0f - 1.0f);
        break;
      case GgmlType::BF16: {
        const uint16_t h = ft::f32_to_bf16(static_cast<float>(rng() % 2001) / 1000.0f - 1.0f);
        std::memcpy(b, &h, 2);
        break;
      }
      case GgmlType::Q6_K:
        put_f16(b + 208, 0.001f);
        break;
      case GgmlType::MXFP4:
        b[0] = 120;
        break;
      case GgmlType::NVFP4:
        for (int s = 0; s < 4; ++s) b[s] = static_cast<uint8_t>(0x20 + rng() % 0x40);
        break;
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put_f16(b, 0.001f);
        put_f16(b + 2, 0.001f);
        break;
      default:  // Q8_0, Q4_0, Q5_0, IQ3_XXS: d at offset 0
        put_f16(b, 0.01f);
        break;
    }
  }
  return w;
}

// The part of ggml-cpu.h's interface this tool needs (declared here, resolved by dlsym).
struct GgmlTypeTraitsCpu {
  void (*from_float)(const float* x, void* y, int64_t k);
  void (*vec_dot)(int n, float* s, size_t bs, const void* x, size_t bx, const void* y, size_t by, int nrc);
  int vec_dot_type;
  int64_t nrows;
};
struct GgmlCpu {
  void (*init)() = nullptr;
  const GgmlTypeTraitsCpu* (*traits)(int) = nullptr;
  explicit operator bool() const { return traits != nullptr; }
};

GgmlCpu load_ggml_cpu(const std::string& path) {
  GgmlCpu g;
  if (path.empty()) return g;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) ft::fail("--ggml-cpu-lib {}: {}", path, dlerror());
  g.init = reinterpret_cast<void (*)()>(dlsym(h, "ggml_cpu_init"));
  g.traits = reinterpret_cast<const GgmlTypeTraitsCpu* (*)(int)>(dlsym(h, "ggml_get_type_traits_cpu"));
  if (g.init == nullptr || g.traits == nullptr) ft::fail("--ggml-cpu-lib {}: not a ggml CPU backend library", path);
  g.init();
  return g;
}

template <class F>
double time_per_call(F&& f, double min_seconds) {
  using clk = std::chrono::steady_clock;
  f();  // warm-up
  int64_t calls = 0;
  const auto t0 = clk::now();
  double el = 0;
  do {
    f();
    ++calls;
    el = std::chrono::duration<double>(clk::now() - t0).count();
  } while (el < min_seconds);
  return el / static_cast<double>(calls);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Single-thread CPU matmul throughput per type, shape and token count"};
  std::string types = "f32,f16,bf16,q8_0,q4_K,q6_K,mxfp4,nvfp4,q4_0,q5_K,iq3_xxs";
  std::string shapes = "2048x2048,4096x4096,768x2048";
  std::string ntoks = "1,64";
  std::string isas;
  std::string ggml_lib;
  std::string acts = "f32,q8";
  double min_time = 0.3;
  int64_t cache_bytes = int64_t{512} << 20;
  app.add_option("--types", types, "comma-separated ggml type names");
  app.add_option("--shapes", shapes, "comma-separated ROWSxK");
  app.add_option("--ntok", ntoks, "comma-separated token counts");
  app.add_option("--isa", isas, "kernel families to time (default: every one this CPU has except scalar)");
  app.add_option("--ggml-cpu-lib", ggml_lib, "a libggml-cpu-*.so to time ggml's vec_dot path beside ours");
  app.add_option("--act", acts, "activation routes to time: f32 (exact fp32), q8 (llama.cpp's rounding)");
  app.add_option("--min-time", min_time, "seconds per measurement");
  app.add_option("--flush-bytes", cache_bytes, "total bytes of weight copies cycled through (beats the LLC)");
  CLI11_PARSE(app, argc, argv);

  try {
    std::vector<ft::Isa> isa_list;
    if (isas.empty()) {
      for (ft::Isa i : {ft::Isa::kAvx2, ft::Isa::kAvx512})
        if (ft::isa_supported(i)) isa_list.push_back(i);
    } else {
      for (const auto& s : split(isas, ',')) {
        const auto i = ft::isa_from_name(s);
        if (!i) ft::fail("--isa {}: expected scalar, avx2 or avx512", s);
        if (!ft::isa_supported(*i)) ft::fail("--isa {}: not supported by this CPU", s);
        isa_list.push_back(*i);
      }
    }
    const GgmlCpu ggml = load_ggml_cpu(ggml_lib);
    fmt::print("# best isa: {}; 1 thread; GB/s = weight bytes / time; GFLOP/s = 2*rows*k*ntok / time\n",
               ft::isa_name(ft::best_isa()));
    fmt::print("{:<8} {:>11} {:>5} {:<12} {:>10} {:>8} {:>9}\n", "type", "shape", "ntok", "kernel", "us/call", "GB/s",
               "GFLOP/s");
    std::mt19937 rng(1);
    for (const auto& tn : split(types, ',')) {
      const auto t = ft::ggml_type_from_name(tn);
      if (!t) ft::fail("--types: unknown type {}", tn);
      if (!ft::quant::matmul_supported(*t)) ft::fail("--types: no matmul for {}", tn);
      for (const auto& sh : split(shapes, ',')) {
        const auto dims = split(sh, 'x');
        if (dims.size() != 2) ft::fail("--shapes {}: expected ROWSxK", sh);
        const int64_t rows = std::stoll(dims[0]), k = std::stoll(dims[1]);
        const int64_t rb = ft::row_bytes(*t, k);
        const int64_t bytes = rows * rb;
        const int64_t n_copies = std::max<int64_t>(1, std::min<int64_t>(64, cache_bytes / bytes));
        std::vector<std::vector<uint8_t>> ws;
        for (int64_t c = 0; c < n_copies; ++c) ws.push_back(make_weights(*t, rows, k, rng));
        for (const auto& ns : split(ntoks, ',')) {
          const int64_t n_tok = std::stoll(ns);
          std::vector<float> x(static_cast<size_t>(n_tok * k)), y(static_cast<size_t>(n_tok * rows));
          for (auto& v : x) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
          ft::quant::MatmulArgs a;
          a.type = *t;
          a.row_bytes = rb;
          a.k = k;
          a.x = x.data();
          a.ldx = k;
          a.n_tok = n_tok;
          a.y = y.data();
          a.ldy = rows;
          const double flops = 2.0 * static_cast<double>(rows * k * n_tok);
          auto report = [&](const std::string& kernel, double sec) {
            fmt::print("{:<8} {:>11} {:>5} {:<12} {:>10.1f} {:>8.2f} {:>9.2f}\n", tn, sh, n_tok, kernel, sec * 1e6,
                       static_cast<double>(bytes) / sec / 1e9, flops / sec / 1e9);
            std::fflush(stdout);
          };
          for (const auto& act : split(acts, ',')) {
            if (act != "f32" && act != "q8") ft::fail("--act {}: expected f32 or q8", act);
            a.act_quant = act == "q8" ? ft::quant::ActQuant::kQ8 : ft::quant::ActQuant::kNone;
            for (ft::Isa isa : isa_list) {
              size_t c = 0;
              const double sec = time_per_call(
                  [&] {
                    a.w = ws[c++ % ws.size()].data();
                    ft::quant::matmul_on(isa, a, 0, rows);
                  },
                  min_time);
              report(std::string(ft::isa_name(isa)) + (act == "q8" ? "-q8" : ""), sec);
            }
          }
          if (ggml) {
            const GgmlTypeTraitsCpu* tt = ggml.traits(static_cast<int>(*t));
            const GgmlTypeTraitsCpu* vt = ggml.traits(tt->vec_dot_type);
            if (tt->vec_dot == nullptr || (tt->vec_dot_type != 0 && vt->from_float == nullptr)) {
              fmt::print("{:<8} {:>11} {:>5} ggml: no vec_dot\n", tn, sh, n_tok);
              continue;
            }
            const auto vtr = ft::ggml_type_traits(tt->vec_dot_type);
            const int64_t xq_row = ft::row_bytes(static_cast<GgmlType>(tt->vec_dot_type), k);
            std::vector<uint8_t> xq(static_cast<size_t>(xq_row * n_tok));
            size_t c = 0;
            const double sec = time_per_call(
                [&] {
                  const uint8_t* w = ws[c++ % ws.size()].data();
                  // quantise activations once per call, as ggml_compute_forward_mul_mat does
                  for (int64_t tk = 0; tk < n_tok; ++tk) {
                    if (tt->vec_dot_type == 0) {
                      std::memcpy(xq.data() + tk * xq_row, x.data() + tk * k, static_cast<size_t>(k) * 4);
                    } else {
                      vt->from_float(x.data() + tk * k, xq.data() + tk * xq_row, k);
                    }
                  }
                  for (int64_t r = 0; r < rows; ++r)
                    for (int64_t tk = 0; tk < n_tok; ++tk)
                      tt->vec_dot(static_cast<int>(k), &y[static_cast<size_t>(tk * rows + r)], 0, w + r * rb, 0,
                                  xq.data() + tk * xq_row, 0, 1);
                },
                min_time);
            report(fmt::format("ggml({})", vtr ? vtr->name : "?"), sec);
          }
        }
      }
    }
  } catch (const ft::Error& e) {
    fmt::print(stderr, "ft-bench-matmul: {}\n", e.what());
    return 2;
  }
  return 0;
}
