// qwen35 / qwen35moe through the engine: the Gated DeltaNet state carried across prompt
// micro-batches and decode steps, zeroed with the sequence, KV only for attention layers,
// and the loader's refusals of broken hybrid files.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "core/error.h"
#include "engine/session.h"
#include "model/model.h"
#include "model_util.h"

namespace ft::model {
namespace {

using engine::ActType;
using test::all_logits;
using test::max_diff;
using testgen::Arch;
using testgen::Role;

// NVFP4 attention/GDN projections, FFN/shared expert, experts and output, with scales.
const std::string& model_file(Arch a) {
  static std::map<Arch, std::string> cache;
  auto it = cache.find(a);
  if (it != cache.end()) return it->second;
  auto spec = testgen::preset("tiny", a);
  for (Role r : {Role::kAttn, Role::kMlp, Role::kExperts, Role::kOutput}) spec.set_type(r, GgmlType::NVFP4);
  const std::string path = test::tmp_path(std::string(testgen::arch_name(a)) + ".gguf");
  testgen::generate_model(spec, path);
  return cache[a] = path;
}

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((31 * i + salt) % 256);
  return p;
}

engine::SessionOptions opts(int64_t ubatch, int threads = 2) {
  engine::SessionOptions o;
  o.n_ctx = 128;
  o.n_threads = threads;
  o.n_ubatch = ubatch;
  return o;
}

class Qwen35Test : public ::testing::TestWithParam<Arch> {};

// 70 tokens: one batch, micro-batches of 16 (the conv window and the delta-rule state cross
// batch borders), token by token.
TEST_P(Qwen35Test, PrefillBatchesMatchTokenByTokenDecode) {
  auto m = load_model(model_file(GetParam()));
  const auto p = prompt(70, 5);
  engine::Session whole(*m, opts(512)), split(*m, opts(16)), step(*m, opts(512));
  const auto a = all_logits(whole, p, true);
  float lo = a[0], hi = a[0];
  for (float x : a) lo = std::min(lo, x), hi = std::max(hi, x);
  EXPECT_GT(hi - lo, 5.0f) << "degenerate logits";
  EXPECT_LT(max_diff(a, all_logits(split, p, true)), 1e-3f);
  EXPECT_LT(max_diff(a, all_logits(step, p, false)), 1e-3f);
}

// A new sequence starts from zero state: after another prompt and a reset, the same prompt
// gives the same bits as in a fresh session (a state left over would change them).
TEST_P(Qwen35Test, ResetStartsFromZeroState) {
  auto m = load_model(model_file(GetParam()));
  const auto p = prompt(20, 9), other = prompt(33, 100);
  engine::Session fresh(*m, opts(512)), reused(*m, opts(512));
  const auto a = all_logits(fresh, p, true);
  all_logits(reused, other, true);
  const auto carried = all_logits(reused, p, true);  // continues the first sequence
  EXPECT_GT(max_diff(a, carried), 1e-2f);
  reused.reset();
  EXPECT_EQ(a, all_logits(reused, p, true));
}

TEST_P(Qwen35Test, OnlyAttentionLayersHaveKv) {
  auto m = load_model(model_file(GetParam()));
  int64_t n_attn = 0;
  for (int64_t il = 0; il < m->hp.n_layer; ++il) n_attn += m->hp.is_recurrent(il) ? 0 : 1;
  EXPECT_EQ(n_attn, 2);  // tiny preset: layers 1 and 3
  engine::Session s(*m, opts(512));
  const size_t kv_row = static_cast<size_t>(m->hp.n_head_kv[0] * m->hp.head_dim_k) * sizeof(float);
  EXPECT_EQ(s.kv().bytes(), static_cast<size_t>(n_attn) * 2 * 128 * kv_row);
}

INSTANTIATE_TEST_SUITE_P(Archs, Qwen35Test, ::testing::Values(Arch::kQwen35, Arch::kQwen35Moe),
                         [](const auto& info) { return std::string(testgen::arch_name(info.param)); });

// Loads `path` expecting an ft::Error whose message contains `what`.
void expect_refused(const std::string& path, const std::string& what) {
  try {
    load_model(path);
    ADD_FAILURE() << path << " loaded, expected an error mentioning " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Qwen35Loader, RefusesBrokenFiles) {
  const std::string& src = model_file(Arch::kQwen35);
  auto keep_all = [](const gguf::TensorInfo&) { return true; };
  {
    // A required ssm key missing.
    const std::string dst = test::tmp_path("q35_nokey.gguf");
    auto f = gguf::File::open(src);
    gguf::Writer w(f->alignment());
    for (const auto& [k, v] : f->metadata())
      if (k != "general.alignment" && k != "qwen35.ssm.state_size") w.set(k, v);
    for (const auto& t : f->tensors())
      w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + std::max(1, t.n_dims)),
                   std::vector<uint8_t>(t.data, t.data + t.nbytes));
    w.write(dst);
    expect_refused(dst, "qwen35.ssm.state_size");
  }
  {
    // inner_size must be time_step_rank * state_size.
    const std::string dst = test::tmp_path("q35_inner.gguf");
    test::rewrite_gguf(src, dst, keep_all, [](gguf::Writer& w) { w.set_u32("qwen35.ssm.inner_size", 96); });
    expect_refused(dst, "ssm.inner_size");
  }
  {
    // The conv kernel is never scaled (llama.cpp has no slot for it).
    const std::string dst = test::tmp_path("q35_convscale.gguf");
    test::rewrite_gguf(src, dst, keep_all, [](gguf::Writer& w) {
      const float one = 1.0f;
      w.add_tensor("blk.0.ssm_conv1d.scale", GgmlType::F32, {1},
                   std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&one), reinterpret_cast<const uint8_t*>(&one) + 4));
    });
    expect_refused(dst, "blk.0.ssm_conv1d.scale");
  }
  {
    // A Gated DeltaNet tensor missing.
    const std::string dst = test::tmp_path("q35_noa.gguf");
    test::rewrite_gguf(src, dst, [](const gguf::TensorInfo& t) { return t.name != "blk.2.ssm_a"; }, {});
    expect_refused(dst, "blk.2.ssm_a");
  }
}

// Last-token logits of a short prompt (fresh session).
std::vector<float> logits_of(const std::string& path) {
  auto m = load_model(path);
  engine::Session s(*m, opts(512));
  const auto p = prompt(12, 3);
  const float* l = s.eval(p.data(), static_cast<int64_t>(p.size()));
  return std::vector<float>(l, l + s.n_vocab());
}

// attention.recurrent_layers replaces full_attention_interval; an MTP block after the trunk
// (block_count + 1, nextn_predict_layers = 1) is loaded past and never run.
TEST(Qwen35Loader, RecurrentLayersKeyAndMtpBlock) {
  const std::string& src = model_file(Arch::kQwen35);
  const auto ref = logits_of(src);
  auto keep_all = [](const gguf::TensorInfo&) { return true; };
  {
    const std::string dst = test::tmp_path("q35_reclayers.gguf");
    test::rewrite_gguf(src, dst, keep_all, [](gguf::Writer& w) {
      w.set_u32("qwen35.full_attention_interval", 3);  // would be wrong; the array wins
      w.set_bool_array("qwen35.attention.recurrent_layers", {true, false, true, false});
    });
    EXPECT_EQ(ref, logits_of(dst));
    const std::string bad = test::tmp_path("q35_reclayers_bad.gguf");
    test::rewrite_gguf(src, bad, keep_all, [](gguf::Writer& w) {
      w.set_bool_array("qwen35.attention.recurrent_layers", {true, true, true, false});
    });
    expect_refused(bad, "blk.1.");  // layer 1 holds attention tensors, not Gated DeltaNet ones
  }
  {
    const std::string dst = test::tmp_path("q35_mtp.gguf");
    auto f = gguf::File::open(src);
    test::rewrite_gguf(src, dst, keep_all, [&](gguf::Writer& w) {
      w.set_u32("qwen35.block_count", 5);
      w.set_u32("qwen35.nextn_predict_layers", 1);
      for (const auto& t : f->tensors()) {  // layer 3 (full attention) copied as the MTP block
        if (t.name.rfind("blk.3.", 0) != 0) continue;
        w.add_tensor("blk.4." + t.name.substr(6), t.type, std::vector<int64_t>(t.ne, t.ne + std::max(1, t.n_dims)),
                     std::vector<uint8_t>(t.data, t.data + t.nbytes));
      }
    });
    EXPECT_EQ(ref, logits_of(dst));
  }
}

}  // namespace
}  // namespace ft::model
