// ft-bigmodel (tools/bigmodel.cpp): one-layer, small-vocab versions of the two presets load
// through our loader with the real shapes and give finite, spread-out logits on the CPU
// engine; each weight type's random blocks decode to the intended RMS (times the NVFP4
// second-level scale); the file does not depend on the thread count; the printed bytes per
// decode token equal a recount from the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/session.h"
#include "format/gguf.h"
#include "model/model.h"
#include "quant/dequant.h"
#include "subprocess.h"

namespace fs = std::filesystem;

namespace ft {
namespace {

const std::string kTool = std::string(FT_BINARY_DIR) + "/ft-bigmodel";

std::string tmp_dir() {
  // ctest runs each test in its own process, in parallel: keep their files apart.
  const fs::path d = fs::path(FT_BINARY_DIR) / "test-tmp" / "bigmodel" / std::to_string(::getpid());
  fs::create_directories(d);
  return d.string();
}

// The models are hundreds of MB: remove this process's directory when the tests end.
class RemoveTmpDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_dir(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kRemoveTmpDir =
    ::testing::AddGlobalTestEnvironment(new RemoveTmpDir);

test::RunResult bigmodel(const std::string& args) {
  static int n = 0;
  return test::run_command(kTool + " -q " + args, tmp_dir() + "/run" + std::to_string(n++));
}

// Writes a model and returns its path; fails the test on a non-zero exit.
std::string make(const std::string& name, const std::string& args, std::string* out = nullptr) {
  const std::string path = tmp_dir() + "/" + name + ".gguf";
  const auto r = bigmodel(args + " -o " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (out) *out = r.out;
  return path;
}

float scalar_f32(const gguf::TensorInfo* t, int64_t i = 0) {
  float v;
  std::memcpy(&v, t->data + 4 * i, 4);
  return v;
}

// RMS and mean of rows [r0, r0 + n) of a weight, dequantised (no second-level scale).
std::pair<double, double> rms_mean(const gguf::TensorInfo& t, int64_t r0, int64_t n) {
  std::vector<float> row(static_cast<size_t>(t.ne[0]));
  double s2 = 0, s1 = 0;
  for (int64_t r = r0; r < r0 + n; ++r) {
    quant::dequantize_row_ref(t.type, t.data + r * t.row_bytes(), row.data(), t.ne[0]);
    for (float x : row) s2 += static_cast<double>(x) * x, s1 += x;
  }
  const double cnt = static_cast<double>(n * t.ne[0]);
  return {std::sqrt(s2 / cnt), s1 / cnt};
}

// Logits of the last token of a short prompt (fp32 engine).
std::vector<float> logits(const model::Model& m) {
  engine::SessionOptions o;
  o.n_ctx = 16;
  o.n_threads = 2;
  engine::Session s(m, o);
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 3, 250};
  const float* l = s.eval(prompt.data(), static_cast<int64_t>(prompt.size()));
  return std::vector<float>(l, l + s.n_vocab());
}

void expect_sane_logits(const std::vector<float>& l) {
  double s1 = 0, s2 = 0;
  for (float x : l) {
    ASSERT_TRUE(std::isfinite(x));
    s1 += x, s2 += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(l.size()), sd = std::sqrt(s2 / n - (s1 / n) * (s1 / n));
  // The generator aims at a logit std of 3.
  EXPECT_GT(sd, 1.0);
  EXPECT_LT(sd, 10.0);
}

uint64_t printed(const std::string& out, const std::string& key) {
  const auto p = out.find(key + " ");
  EXPECT_NE(p, std::string::npos) << out;
  return p == std::string::npos ? 0 : std::stoull(out.substr(p + key.size() + 1));
}

TEST(BigModel, Llama8bOneLayerHasTheRealShapesAndRuns) {
  std::string out;
  const auto path = make("llama", "--preset llama8b-nvfp4 --layers 1 --vocab 1024", &out);
  auto m = model::load_model(path);
  EXPECT_EQ(m->hp.arch, "llama");
  EXPECT_EQ(m->hp.n_layer, 1);
  EXPECT_EQ(m->hp.n_embd, 4096);
  EXPECT_EQ(m->hp.n_head[0], 32);
  EXPECT_EQ(m->hp.n_head_kv[0], 8);
  EXPECT_EQ(m->hp.head_dim_k, 128);
  EXPECT_EQ(m->hp.n_ff[0], 14336);
  EXPECT_EQ(m->hp.n_vocab, 1024);
  EXPECT_FLOAT_EQ(m->hp.rope.freq_base, 500000.0f);
  const auto& f = *m->file;
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, GgmlType::BF16);
  EXPECT_EQ(f.find_tensor("output.weight")->type, GgmlType::BF16);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->type, GgmlType::NVFP4);
  // llama3 rope factors: 1 for the fast dimensions, 8 for the slow ones.
  const auto* rf = f.find_tensor("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  EXPECT_EQ(rf->ne[0], 64);
  EXPECT_FLOAT_EQ(scalar_f32(rf, 0), 1.0f);
  EXPECT_FLOAT_EQ(scalar_f32(rf, 63), 8.0f);
  for (const char* w :
       {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
    const auto* s = f.find_tensor(std::string("blk.0.") + w + ".scale");
    ASSERT_NE(s, nullptr) << w;
    const float v = scalar_f32(s);
    EXPECT_GT(v, 1.0f / 256) << w;
    EXPECT_LE(v, 2.0f) << w;
    EXPECT_GE(std::fabs(v - 1.0f), 0.05f) << w;
  }
  EXPECT_EQ(f.find_tensor("output.scale"), nullptr);  // BF16 head: no scale
  expect_sane_logits(logits(*m));
  EXPECT_EQ(printed(out, "file_bytes"), fs::file_size(path));
}

TEST(BigModel, Qwen3Moe30bOneLayerHasTheRealShapesAndRuns) {
  const auto path = make("qwen", "--preset qwen3moe-30b-nvfp4 --layers 1 --vocab 1024");
  auto m = model::load_model(path);
  EXPECT_EQ(m->hp.arch, "qwen3moe");
  EXPECT_EQ(m->hp.n_embd, 2048);
  EXPECT_EQ(m->hp.n_head[0], 32);
  EXPECT_EQ(m->hp.n_head_kv[0], 4);
  EXPECT_EQ(m->hp.head_dim_k, 128);
  EXPECT_EQ(m->hp.n_expert, 128);
  EXPECT_EQ(m->hp.n_expert_used[0], 8);
  EXPECT_EQ(m->hp.n_ff_exp, 768);
  EXPECT_FLOAT_EQ(m->hp.rope.freq_base, 1e6f);
  const auto& f = *m->file;
  EXPECT_NE(f.find_tensor("blk.0.attn_q_norm.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_inp.weight")->type, GgmlType::F32);
  const auto* s = f.find_tensor("blk.0.ffn_down_exps.scale");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->ne[0], 128);
  float lo = 10, hi = 0;
  for (int64_t e = 0; e < 128; ++e)
    lo = std::min(lo, scalar_f32(s, e)), hi = std::max(hi, scalar_f32(s, e));
  EXPECT_GT(lo, 1.0f / 256);
  EXPECT_LE(hi, 2.0f);
  EXPECT_GT(hi / lo, 2.0f);  // per-expert scales really differ
  expect_sane_logits(logits(*m));
}

// Each type's random blocks decode (times .scale) to the RMS the generator aims at:
// 1/sqrt(k) for input projections, 1.5/sqrt(n_layer)/sqrt(k) for attn_output and
// (that / 0.6) for the down experts, with a mean near 0.
class BigModelTypes : public ::testing::TestWithParam<const char*> {};

TEST_P(BigModelTypes, WeightsHaveTheTargetRms) {
  const std::string type = GetParam();
  const auto path =
      make("t_" + type,
           "--preset qwen3moe-30b-nvfp4 --layers 1 --vocab 1024 --experts 4 --type " + type);
  auto f = gguf::File::open(path);
  auto check = [&](const std::string& base, int64_t r0, int64_t n, double target, float s2) {
    const auto* t = f->find_tensor(base + ".weight");
    ASSERT_NE(t, nullptr) << base;
    EXPECT_EQ(type_name(t->type), type == "q4_k" ? "q4_K" : type);
    const auto [rms, mean] = rms_mean(*t, r0, n);
    EXPECT_NEAR(rms * s2 / target, 1.0, 0.12) << base << " rows " << r0;
    EXPECT_LT(std::fabs(mean), 0.02 * rms) << base;
  };
  auto s2_of = [&](const std::string& base, int64_t i) {
    const auto* s = f->find_tensor(base + ".scale");
    EXPECT_EQ(s != nullptr, type == "nvfp4") << base;
    return s ? scalar_f32(s, i) : 1.0f;
  };
  check("blk.0.attn_q", 0, 4096, 1 / std::sqrt(2048.0), s2_of("blk.0.attn_q", 0));
  check("blk.0.attn_output", 0, 2048, 1.5 / std::sqrt(4096.0), s2_of("blk.0.attn_output", 0));
  // expert 2 of the down stack (rows 2*2048 ..) with its own scale
  check("blk.0.ffn_down_exps", 2 * 2048, 2048, 1.5 / 0.6 / std::sqrt(768.0),
        s2_of("blk.0.ffn_down_exps", 2));
  check("blk.0.ffn_up_exps", 3 * 768, 768, 1 / std::sqrt(2048.0), s2_of("blk.0.ffn_up_exps", 3));
}

INSTANTIATE_TEST_SUITE_P(Types, BigModelTypes,
                         ::testing::Values("nvfp4", "q4_k", "q8_0", "mxfp4", "bf16"));

TEST(BigModel, ThreadCountDoesNotChangeTheFile) {
  const std::string args =
      "--preset qwen3moe-30b-nvfp4 --layers 2 --vocab 1024 --experts 4 --seed 7";
  const auto a = make("t1", args + " --threads 1");
  const auto b = make("t3", args + " --threads 3");
  const auto c =
      make("s8", "--preset qwen3moe-30b-nvfp4 --layers 2 --vocab 1024 --experts 4 --seed 8");
  EXPECT_EQ(test::slurp(a), test::slurp(b));
  EXPECT_NE(test::slurp(a), test::slurp(c));  // the seed does matter
}

// A decode step reads every weight once except token_embd (one row) and the experts
// (n_expert_used of n_expert); recounted here from the file.
TEST(BigModel, BytesPerTokenMatchesTheFile) {
  std::string out;
  const auto path =
      make("bpt", "--preset qwen3moe-30b-nvfp4 --layers 2 --vocab 1024 --experts 16", &out);
  auto f = gguf::File::open(path);
  double expect = 0;
  for (const auto& t : f->tensors()) {
    double share = 1.0;
    if (t.name == "token_embd.weight") share = 1.0 / static_cast<double>(t.ne[1]);
    if (t.name.find("_exps.weight") != std::string::npos) share = 8.0 / 16.0;
    expect += static_cast<double>(t.nbytes) * share;
  }
  EXPECT_NEAR(static_cast<double>(printed(out, "bytes_per_token")), expect, 8.0);
  // --plan prints the same numbers without writing a file.
  const auto plan =
      bigmodel("--preset qwen3moe-30b-nvfp4 --layers 2 --vocab 1024 --experts 16 --plan");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(printed(plan.out, "bytes_per_token"), printed(out, "bytes_per_token"));
  EXPECT_EQ(printed(plan.out, "file_bytes"), fs::file_size(path));
}

TEST(BigModel, BadOptionsAreExit2) {
  for (const std::string args :
       {"--preset nope -o x.gguf", "--preset llama8b-nvfp4 --type q6_K -o x.gguf",
        "--preset llama8b-nvfp4 --experts 4 -o x.gguf",
        "--preset llama8b-nvfp4 --vocab 10 -o x.gguf", "--preset llama8b-nvfp4"}) {
    const auto r = bigmodel(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_EQ(r.signal, 0) << args;
    EXPECT_NE(r.err.find("ft-bigmodel"), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace ft
