// ft convert DIR --out FILE.gguf [--outtype auto|bf16|f16|f32|nvfp4]: a Hugging Face checkpoint
// (llama / qwen3 / qwen3moe; BF16/F16/F32, ModelOpt or compressed-tensors NVFP4) to the GGUF
// llama.cpp's converter writes (hf/convert.h). Streams tensor by tensor with a progress bar.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "hf/convert.h"

namespace ft::cli {
namespace {

struct ConvertOptions {
  std::string dir;
  std::string out;
  std::string outtype = "auto";
  bool quiet = false;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int run_convert(const ConvertOptions& o) {
  const hf::OutType t = hf::parse_outtype(o.outtype);
  const double t0 = now_s();
  auto conv = hf::Conversion::plan(o.dir, t);
  double last = 0;
  if (!o.quiet) {
    conv->set_progress([&](uint64_t done, uint64_t total) {
      const double now = now_s();
      if (done != total && now - last < 0.2) return;
      last = now;
      const int width = 30;
      const int fill = total ? static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * width) : width;
      std::fprintf(stderr, "\rconverting [%s%s] %6.1f / %.1f MiB", std::string(static_cast<size_t>(fill), '#').c_str(),
                   std::string(static_cast<size_t>(width - fill), ' ').c_str(), static_cast<double>(done) / (1 << 20),
                   static_cast<double>(total) / (1 << 20));
      if (done == total) std::fputc('\n', stderr);
    });
  }
  conv->write(o.out);
  if (!o.quiet)
    std::fprintf(stderr, "wrote %s: %s, %lld tensors, %.1f MiB of tensor data in %.2f s\n", o.out.c_str(),
                 conv->config().arch.c_str(), static_cast<long long>(conv->n_tensors()),
                 static_cast<double>(conv->data_bytes()) / (1 << 20), now_s() - t0);
  return 0;
}

}  // namespace

Command register_convert(CLI::App& app) {
  auto opts = std::make_shared<ConvertOptions>();
  auto* sub = app.add_subcommand("convert", "Convert a Hugging Face checkpoint directory to GGUF");
  sub->add_option("dir", opts->dir, "checkpoint directory (config.json, *.safetensors, tokenizer.json)")->required();
  sub->add_option("--out,-o", opts->out, "output GGUF file")->required();
  sub->add_option("--outtype", opts->outtype,
                  "float weights as: auto (checkpoint type), bf16, f16, f32, or nvfp4 (quantise projections and "
                  "experts the ModelOpt way); NVFP4 checkpoint weights are always repacked losslessly")
      ->capture_default_str();
  sub->add_flag("--quiet,-q", opts->quiet, "No progress output");
  return {sub, [opts] { return run_convert(*opts); }};
}

}  // namespace ft::cli
