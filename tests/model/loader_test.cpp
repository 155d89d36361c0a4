// The loader's refusals and acceptances (tensor table, check_scales, leftover tensors),
// on tiny generated models rewritten with one defect each. Each refusal names the tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>

#include "core/error.h"
#include "model/model.h"
#include "model_util.h"

namespace ft::model {
namespace {

using testgen::Arch;
using testgen::Role;

std::vector<uint8_t> f32_bytes(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// qwen3moe with NVFP4 attention, experts and output, all carrying .scale tensors.
const std::string& scaled_model() {
  static const std::string path = [] {
    auto spec = testgen::preset("tiny", Arch::kQwen3Moe);
    for (Role r : {Role::kAttn, Role::kExperts, Role::kOutput}) spec.set_type(r, GgmlType::NVFP4);
    const std::string p = test::tmp_path("loader_qwen3moe_nvfp4.gguf");
    testgen::generate_model(spec, p);
    return p;
  }();
  return path;
}

void expect_refused(const std::string& path, const std::string& must_mention) {
  try {
    load_model(path);
    FAIL() << "loaded " << path << " but expected a refusal naming " << must_mention;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(must_mention), std::string::npos) << e.what();
  }
}

TEST(Loader, AcceptsScaledNvfp4AndReadsScales) {
  auto m = load_model(scaled_model());
  auto f = gguf::File::open(scaled_model());
  const auto* s = f->find_tensor("blk.1.attn_k.scale");
  ASSERT_NE(s, nullptr);
  const float want = reinterpret_cast<const float*>(s->data)[0];
  const auto& parts = m->layers[1].qkv.parts();
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].scale, want);
  EXPECT_NE(want, 1.0f);
  const auto* es = f->find_tensor("blk.0.ffn_down_exps.scale");
  ASSERT_NE(es, nullptr);
  EXPECT_EQ(m->layers[0].experts.down.scale_of(3), reinterpret_cast<const float*>(es->data)[3]);
  EXPECT_TRUE(m->layers[0].is_moe());
}

TEST(Loader, InputScaleIsAcceptedAndUnused) {
  const std::string p = test::tmp_path("input_scale.gguf");
  test::rewrite_gguf(scaled_model(), p, nullptr, [](gguf::Writer& w) {
    w.add_tensor("blk.0.attn_q.input_scale", GgmlType::F32, {1}, f32_bytes({123.0f}));
    w.add_tensor("blk.0.ffn_up_exps.input_scale", GgmlType::F32, {4}, f32_bytes({1, 2, 3, 4}));
  });
  EXPECT_NO_THROW(load_model(p));
}

TEST(Loader, UnknownTensorIsRefused) {
  const std::string p = test::tmp_path("unknown.gguf");
  test::rewrite_gguf(scaled_model(), p, nullptr, [](gguf::Writer& w) {
    w.add_tensor("blk.0.ffn_gate_shexp.weight", GgmlType::F32, {128, 8}, std::vector<uint8_t>(128 * 8 * 4));
  });
  expect_refused(p, "blk.0.ffn_gate_shexp.weight");
}

TEST(Loader, ScaleForARoleTheArchDoesNotRunIsRefused) {
  // A valid NVFP4 weight + scale pair for a role qwen3moe has no use for (shared expert).
  const std::string p = test::tmp_path("shexp_scale.gguf");
  test::rewrite_gguf(scaled_model(), p, nullptr, [](gguf::Writer& w) {
    w.add_tensor("blk.0.ffn_up_shexp.weight", GgmlType::NVFP4, {128, 4}, std::vector<uint8_t>(2 * 36 * 4));
    w.add_tensor("blk.0.ffn_up_shexp.scale", GgmlType::F32, {1}, f32_bytes({0.5f}));
  });
  expect_refused(p, "blk.0.ffn_up_shexp");
}

TEST(Loader, ScaleNextToNonNvfp4IsRefused) {
  auto spec = testgen::preset("tiny", Arch::kQwen3);
  const std::string base = test::tmp_path("qwen3_f32.gguf"), p = test::tmp_path("scale_f32.gguf");
  testgen::generate_model(spec, base);
  EXPECT_NO_THROW(load_model(base));
  test::rewrite_gguf(base, p, nullptr, [](gguf::Writer& w) {
    w.add_tensor("blk.0.ffn_down.scale", GgmlType::F32, {1}, f32_bytes({0.5f}));
  });
  expect_refused(p, "blk.0.ffn_down.scale");
}

TEST(Loader, NonF32ScaleIsRefused) {
  const std::string p = test::tmp_path("scale_f16.gguf");
  test::rewrite_gguf(scaled_model(), p,
                     [](const gguf::TensorInfo& t) { return t.name != "blk.0.attn_v.scale"; },
                     [](gguf::Writer& w) { w.add_tensor("blk.0.attn_v.scale", GgmlType::F16, {1}, {0, 0x38}); });
  expect_refused(p, "blk.0.attn_v.scale");
}

TEST(Loader, WrongExpertScaleShapeIsRefused) {
  const std::string p = test::tmp_path("exps_scale_shape.gguf");
  test::rewrite_gguf(scaled_model(), p,
                     [](const gguf::TensorInfo& t) { return t.name != "blk.1.ffn_gate_exps.scale"; },
                     [](gguf::Writer& w) {
                       w.add_tensor("blk.1.ffn_gate_exps.scale", GgmlType::F32, {1}, f32_bytes({0.5f}));
                     });
  expect_refused(p, "blk.1.ffn_gate_exps.scale");
}

TEST(Loader, TiedNvfp4OutputWithScaleIsRefused) {
  // Drop output.weight (so output is tied to token_embd) but keep output.scale.
  const std::string p = test::tmp_path("tied_scale.gguf");
  test::rewrite_gguf(scaled_model(), p, [](const gguf::TensorInfo& t) { return t.name != "output.weight"; },
                     nullptr);
  expect_refused(p, "output.scale");
}

TEST(Loader, WrongShapeAndMissingTensorNamed) {
  const std::string p = test::tmp_path("missing.gguf");
  test::rewrite_gguf(scaled_model(), p,
                     [](const gguf::TensorInfo& t) { return t.name != "blk.1.attn_k_norm.weight"; }, nullptr);
  expect_refused(p, "blk.1.attn_k_norm.weight");
  const std::string q = test::tmp_path("shape.gguf");
  test::rewrite_gguf(scaled_model(), q,
                     [](const gguf::TensorInfo& t) { return t.name != "output_norm.weight"; },
                     [](gguf::Writer& w) {
                       w.add_tensor("output_norm.weight", GgmlType::F32, {64}, std::vector<uint8_t>(256));
                     });
  expect_refused(q, "output_norm.weight");
}

// Hyperparameters a forward pass divides or exponentiates by must be finite and in range (a NaN epsilon or rope base
// decoded to NaN logits), and sizes past any real model are refused (qwen3moe.feed_forward_length 2^32 - 1, unused by
// its layers, was a bad_alloc in the session).
TEST(Loader, NonFiniteOrHugeHyperparametersNamed) {
  const auto with = [](const char* name, const std::function<void(gguf::Writer&)>& edit) {
    const std::string p = test::tmp_path(name);
    test::rewrite_gguf(scaled_model(), p, nullptr, edit);
    return p;
  };
  expect_refused(with("eps.gguf", [](gguf::Writer& w) {
                   w.set_f32("qwen3moe.attention.layer_norm_rms_epsilon", std::numeric_limits<float>::quiet_NaN());
                 }),
                 "qwen3moe.attention.layer_norm_rms_epsilon is nan");
  expect_refused(with("base.gguf", [](gguf::Writer& w) { w.set_f32("qwen3moe.rope.freq_base", -1.0f); }),
                 "qwen3moe.rope.freq_base is -1");
  expect_refused(with("ff.gguf", [](gguf::Writer& w) { w.set_u32("qwen3moe.feed_forward_length", 0xFFFFFFFFu); }),
                 "qwen3moe.feed_forward_length is 4294967295");
}

TEST(Loader, UnsupportedArchNamed) {
  const std::string p = test::tmp_path("arch.gguf");
  gguf::Writer w;
  w.set_string("general.architecture", "mamba");
  w.write(p);
  expect_refused(p, "mamba");
}

}  // namespace
}  // namespace ft::model
