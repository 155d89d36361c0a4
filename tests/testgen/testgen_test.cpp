// Test-model generator: files reopen with our reader, carry the right tensors and
// scales, the F32 twin equals dequant x scale, output is deterministic, the BPE vocab is sane.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "quant/dequant.h"
#include "testgen/bpe_vocab.h"
#include "testgen/model_gen.h"

namespace fs = std::filesystem;
using ft::GgmlType;
using namespace ft::testgen;

namespace {

fs::path tmp_dir() {
  const fs::path d = fs::path(FT_BINARY_DIR) / "testgen-tmp";
  fs::create_directories(d);
  return d;
}

std::vector<char> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

std::vector<float> scale_values(const ft::gguf::TensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

TEST(Testgen, Qwen3MoeNvfp4ExpertsWithScalesAndTwin) {
  auto spec = preset("tiny", Arch::kQwen3Moe);
  spec.set_type(Role::kAttn, GgmlType::NVFP4);
  spec.set_type(Role::kExperts, GgmlType::NVFP4);
  spec.set_type(Role::kOutput, GgmlType::NVFP4);
  const auto dir = tmp_dir();
  const auto m = (dir / "moe.gguf").string(), tw = (dir / "moe.f32.gguf").string(), ns = (dir / "moe.ns.gguf").string();
  const auto res = generate_model(spec, m, tw, ns);
  // 2 layers x (4 attn + 3 experts) + output = 15 scale tensors
  EXPECT_EQ(res.n_scale_tensors, 15);

  auto f = ft::gguf::File::open(m);
  EXPECT_EQ(f->require_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(f->require_uint("qwen3moe.expert_count"), 4u);
  EXPECT_EQ(f->require_uint("qwen3moe.vocab_size"), 256u);
  const auto* up = f->find_tensor("blk.1.ffn_up_exps.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->type, GgmlType::NVFP4);
  EXPECT_EQ(up->ne[0], 128);
  EXPECT_EQ(up->ne[1], 64);
  EXPECT_EQ(up->ne[2], 4);
  const auto* ups = f->find_tensor("blk.1.ffn_up_exps.scale");
  ASSERT_NE(ups, nullptr);
  EXPECT_EQ(ups->type, GgmlType::F32);
  EXPECT_EQ(ups->n_dims, 1);
  EXPECT_EQ(ups->ne[0], 4);
  const auto s = scale_values(*ups);
  // Per-expert scales differ strongly (function-preserving spread factors).
  EXPECT_GT(*std::max_element(s.begin(), s.end()) / *std::min_element(s.begin(), s.end()), 10.0f);
  const auto* qs = f->find_tensor("blk.0.attn_q.scale");
  ASSERT_NE(qs, nullptr);
  EXPECT_EQ(qs->ne[0], 1);
  EXPECT_NE(f->find_tensor("output.scale"), nullptr);
  EXPECT_EQ(f->find_tensor("token_embd.scale"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_inp.scale"), nullptr);

  // Twin: all F32, no .scale, values = dequant(weight) * scale[expert].
  auto t = ft::gguf::File::open(tw);
  for (const auto& ti : t->tensors()) {
    EXPECT_EQ(ti.type, GgmlType::F32) << ti.name;
    EXPECT_EQ(ti.name.find(".scale"), std::string::npos) << ti.name;
  }
  const auto* tup = t->find_tensor("blk.1.ffn_up_exps.weight");
  ASSERT_NE(tup, nullptr);
  const int64_t rb = up->row_bytes();
  std::vector<float> row(128);
  for (int64_t e = 0; e < 4; ++e) {
    const int64_t r = e * 64 + 5;
    ft::quant::dequantize_row_ref(GgmlType::NVFP4, up->data + r * rb, row.data(), 128);
    const float* tw_row = reinterpret_cast<const float*>(tup->data) + r * 128;
    for (int k = 0; k < 128; ++k) ASSERT_EQ(tw_row[k], row[k] * s[e]) << "expert " << e << " k " << k;
  }

  // No-scale copy: same tensors minus the scales.
  auto n = ft::gguf::File::open(ns);
  EXPECT_EQ(n->tensors().size() + 15, f->tensors().size());
  EXPECT_EQ(n->find_tensor("blk.0.attn_q.scale"), nullptr);
}

TEST(Testgen, DeterministicFromSeed) {
  auto spec = preset("tiny", Arch::kLlama);
  spec.set_type(Role::kMlp, GgmlType::Q8_0);
  const auto dir = tmp_dir();
  generate_model(spec, (dir / "a.gguf").string());
  generate_model(spec, (dir / "b.gguf").string());
  spec.seed = 2;
  generate_model(spec, (dir / "c.gguf").string());
  EXPECT_EQ(read_all(dir / "a.gguf"), read_all(dir / "b.gguf"));
  EXPECT_NE(read_all(dir / "a.gguf"), read_all(dir / "c.gguf"));
}

TEST(Testgen, LlamaTinyConfigKeysAndRopeFreqs) {
  auto spec = preset("tiny", Arch::kLlama);
  spec.tied_output = true;
  const auto p = (tmp_dir() / "llama.gguf").string();
  generate_model(spec, p);
  auto f = ft::gguf::File::open(p);
  EXPECT_EQ(f->require_uint("llama.rope.dimension_count"), 32u);
  EXPECT_NEAR(f->require_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
  const auto* rf = f->find_tensor("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  EXPECT_EQ(rf->ne[0], 16);
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);  // tied
  EXPECT_EQ(f->find_tensor("blk.0.attn_q_norm.weight"), nullptr);
}

TEST(Testgen, BlockSizeMismatchIsAnError) {
  auto spec = preset("tiny", Arch::kQwen3);
  spec.set_type(Role::kAttn, GgmlType::Q4_K);  // n_embd 128 is not a multiple of 256
  EXPECT_THROW(generate_model(spec, (tmp_dir() / "bad.gguf").string()), ft::Error);
}

TEST(Testgen, ByteBpeVocab) {
  const auto v = build_byte_bpe_vocab(300);
  ASSERT_GT(v.tokens.size(), 256u + 100u);
  EXPECT_EQ(v.tokens[0], "!");
  EXPECT_EQ(v.tokens[187], "\xC3\xBF");  // byte 0xFF -> U+00FF, last printable byte
  EXPECT_EQ(v.tokens[188], "\xC4\x80");  // byte 0x00 -> U+0100
  EXPECT_EQ(gpt2_byte_to_codepoint(' '), 0x120u);
  EXPECT_EQ(gpt2_byte_to_codepoint('\n'), 0x10Au);
  std::set<std::string> uniq(v.tokens.begin(), v.tokens.end());
  EXPECT_EQ(uniq.size(), v.tokens.size());
  for (const auto& m : v.merges) {
    const auto sp = m.find(' ', 1);
    ASSERT_NE(sp, std::string::npos);
    EXPECT_TRUE(uniq.count(m.substr(0, sp)) && uniq.count(m.substr(sp + 1)) && uniq.count(m.substr(0, sp) + m.substr(sp + 1)))
        << m;
  }
  EXPECT_EQ(v.tokens[static_cast<size_t>(v.eos_id)], "<|im_end|>");
  EXPECT_EQ(v.token_types[static_cast<size_t>(v.eos_id)], 3);
  EXPECT_EQ(v.tokens[static_cast<size_t>(v.bos_id)], "<|endoftext|>");
}

TEST(Testgen, DefaultPresetIsAFewMegabytesWithVocab) {
  const auto p = (tmp_dir() / "default.gguf").string();
  const auto r = generate_model(preset("default", Arch::kQwen3Moe), p);
  EXPECT_GT(r.file_bytes, 1 << 20);
  EXPECT_LT(r.file_bytes, 16 << 20);
  auto f = ft::gguf::File::open(p);
  EXPECT_EQ(f->require_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->require_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(static_cast<int64_t>(f->get_string_array("tokenizer.ggml.tokens")->size()), r.n_vocab);
}

}  // namespace
