// The safetensors reader: views, dtypes, shards, and clear errors on malformed files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../json_mutate.h"
#include "../mutants.h"
#include "core/error.h"
#include "hf/safetensors.h"
#include "hf/safetensors_writer.h"
#include "hf_util.h"

namespace fs = std::filesystem;
using namespace ft::hf;

namespace {

std::vector<uint8_t> f32s(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<StOut> sample() {
  return {{"a.weight", Dtype::kF32, {2, 3}, f32s({1, 2, 3, 4, 5, 6})},
          {"b.bf16", Dtype::kBF16, {2}, {0x80, 0x3F, 0x00, 0xC0}},  // 1.0, -2.0
          {"c.f16", Dtype::kF16, {1}, {0x00, 0x3C}},                 // 1.0
          {"d.u8", Dtype::kU8, {4}, {1, 2, 3, 4}},
          {"e.fp8", Dtype::kF8E4M3, {2}, {0x38, 0x7E}},
          {"f.i32", Dtype::kI32, {1}, {7, 0, 0, 0}},
          {"g.scalar", Dtype::kF32, {}, f32s({0.5f})}};
}

// Header text + 8-byte length + data, for hand-made malformed files.
std::vector<uint8_t> raw(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> b(8 + header.size() + data_bytes, 0);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

std::string error_of(const std::vector<uint8_t>& b) {
  try {
    SafetensorsFile::from_memory(b.data(), b.size(), "bad.safetensors");
  } catch (const ft::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ReadsEveryDtypeAsViews) {
  const auto bytes = safetensors_bytes(sample());
  auto f = SafetensorsFile::from_memory(bytes.data(), bytes.size(), "mem");
  ASSERT_EQ(f->tensors().size(), 7u);
  const StTensor* a = f->find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->dtype, Dtype::kF32);
  EXPECT_EQ(element_f32(*a, 5), 6.0f);
  EXPECT_GE(a->data, bytes.data());
  EXPECT_LT(a->data, bytes.data() + bytes.size());
  EXPECT_EQ(element_f32(*f->find("b.bf16"), 0), 1.0f);
  EXPECT_EQ(element_f32(*f->find("b.bf16"), 1), -2.0f);
  EXPECT_EQ(element_f32(*f->find("c.f16"), 0), 1.0f);
  EXPECT_EQ(f->find("d.u8")->data[3], 4);
  EXPECT_EQ(f->find("e.fp8")->dtype, Dtype::kF8E4M3);
  EXPECT_EQ(f->find("f.i32")->nbytes, 4u);
  EXPECT_EQ(f->find("g.scalar")->numel(), 1);
  EXPECT_EQ(element_f32(*f->find("g.scalar"), 0), 0.5f);
  EXPECT_EQ(f->find("missing"), nullptr);
  EXPECT_THROW(element_f32(*f->find("d.u8"), 0), ft::Error);  // not a float tensor
}

TEST(Safetensors, MalformedFilesNameTheProblem) {
  auto has = [](const std::string& msg, const char* what) {
    return msg.find(what) != std::string::npos && msg.find("bad.safetensors") != std::string::npos;
  };
  EXPECT_PRED2(has, error_of({1, 2, 3}), "truncated");
  {
    auto b = raw("{}", 0);
    b[0] = 0xFF;  // header length past the end
    EXPECT_PRED2(has, error_of(b), "truncated safetensors header");
  }
  EXPECT_PRED2(has, error_of(raw("{\"a\": [1, 2", 0)), "not valid JSON");
  EXPECT_PRED2(has, error_of(raw("[1]", 0)), "not a JSON object");
  EXPECT_PRED2(has, error_of(raw(R"({"w": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}})", 1)), "tensor w: dtype Q4");
  EXPECT_PRED2(has, error_of(raw(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8)),
               "run past the end");
  EXPECT_PRED2(has, error_of(raw(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8)),
               "dtype F32 x shape [3] needs 12");
  EXPECT_PRED2(has, error_of(raw(R"({"w": {"dtype": "BF16", "shape": [2, -1], "data_offsets": [0, 4]}})", 4)),
               "negative");
  EXPECT_PRED2(has, error_of(raw(R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [4, 2]}})", 4)),
               "end before they begin");
  EXPECT_PRED2(has, error_of(raw(R"({"w": {"dtype": "U8", "shape": [2]}})", 4)), "data_offsets");
  EXPECT_PRED2(has, error_of(raw(R"({"w": {"shape": [2], "data_offsets": [0, 2]}})", 4)), "missing \"dtype\"");
}

TEST(Safetensors, ShardedCheckpointThroughTheIndex) {
  const std::string dir = ft::test::hf_tmp("sharded");
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto s = sample();
  write_safetensors(dir + "/model-00001-of-00002.safetensors", {s[0], s[1]});
  write_safetensors(dir + "/model-00002-of-00002.safetensors", {s[2], s[3]});
  const std::string index = R"({"metadata": {}, "weight_map": {
    "a.weight": "model-00001-of-00002.safetensors", "b.bf16": "model-00001-of-00002.safetensors",
    "c.f16": "model-00002-of-00002.safetensors", "d.u8": "model-00002-of-00002.safetensors"}})";
  ft::test::write_file(dir + "/model.safetensors.index.json", index);
  auto c = Checkpoint::open(dir);
  EXPECT_EQ(c->tensors().size(), 4u);
  EXPECT_EQ(element_f32(c->require("c.f16"), 0), 1.0f);
  EXPECT_THROW(c->require("nope"), ft::Error);

  // A shard listed in the index but missing.
  fs::remove(dir + "/model-00002-of-00002.safetensors");
  try {
    Checkpoint::open(dir);
    FAIL() << "missing shard accepted";
  } catch (const ft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard model-00002-of-00002.safetensors is listed"), std::string::npos) << e.what();
  }
  // A tensor the index maps to a shard that does not hold it.
  write_safetensors(dir + "/model-00002-of-00002.safetensors", {s[2]});
  try {
    Checkpoint::open(dir);
    FAIL() << "tensor missing from its shard accepted";
  } catch (const ft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor d.u8"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, DuplicateTensorAcrossFilesIsRefused) {
  const std::string dir = ft::test::hf_tmp("dups");
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto s = sample();
  write_safetensors(dir + "/a.safetensors", {s[0]});
  write_safetensors(dir + "/b.safetensors", {s[0]});
  EXPECT_THROW(Checkpoint::open(dir), ft::Error);
  fs::remove(dir + "/b.safetensors");
  EXPECT_NO_THROW(Checkpoint::open(dir));
  fs::remove(dir + "/a.safetensors");
  EXPECT_THROW(Checkpoint::open(dir), ft::Error);  // no safetensors at all
}


// The header mutated (tests/json_mutate.h) and the bytes flipped or cut: from_memory refuses with ft::Error naming the
// file, or accepts, and then every tensor lies inside the buffer with dtype x shape bytes. Deterministic;
// FT_ST_MUTANTS=N (default 300) for a long run.
TEST(Safetensors, MutatedFilesAreRefusedOrConsistent) {
  const auto base = safetensors_bytes(sample());
  uint64_t n_header = 0;
  std::memcpy(&n_header, base.data(), 8);
  const auto header = nlohmann::ordered_json::parse(base.begin() + 8, base.begin() + 8 + static_cast<std::ptrdiff_t>(n_header));
  const std::vector<uint8_t> data(base.begin() + 8 + static_cast<std::ptrdiff_t>(n_header), base.end());
  const int n = ft::test::mutant_count("FT_ST_MUTANTS", 300);
  const std::vector<nlohmann::ordered_json> values = {"F32", "BF16", "U8", "F8_E4M3", "BOOL", "F64",
                                                      nlohmann::ordered_json::array({0, 0}), nlohmann::ordered_json::array({0, 1u << 30})};
  std::mt19937 rng(5);
  int accepted = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> b;
    if (i % 2 == 0) {  // the header
      auto h = header;
      const int k = std::uniform_int_distribution<int>(1, 3)(rng);
      for (int m = 0; m < k; ++m) ft::test::json_mutate(h, rng, values);
      const std::string text = h.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      b = raw(text, 0);
      b.insert(b.end(), data.begin(), data.end());
    } else {  // the bytes
      b = base;
      const int k = std::uniform_int_distribution<int>(1, 4)(rng);
      for (int m = 0; m < k; ++m) {
        const size_t at = std::uniform_int_distribution<size_t>(0, b.size() - 1)(rng);
        if (std::uniform_int_distribution<int>(0, 5)(rng) == 0)
          b.resize(at);
        else
          b[at] = static_cast<uint8_t>(rng());
        if (b.empty()) break;
      }
    }
    try {
      auto f = SafetensorsFile::from_memory(b.data(), b.size(), "bad.safetensors");
      ++accepted;
      for (const StTensor& t : f->tensors()) {
        ASSERT_GE(t.data, b.data()) << t.name;
        ASSERT_LE(t.data + t.nbytes, b.data() + b.size()) << t.name;
        ASSERT_EQ(t.nbytes, static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(dtype_size(t.dtype))) << t.name;
      }
    } catch (const ft::Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "mutant " << i << ": " << e.what();
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, n);
}

}  // namespace
