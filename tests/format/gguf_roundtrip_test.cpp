// Writer -> reader round trips: every value type with edge values, nested arrays,
// tensors of several types and shapes, alignment, file I/O, and the exact bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <unistd.h>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "gguf_raw.h"

namespace ft::gguf {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

Value scalar(ValueType t) {
  Value v;
  v.type = t;
  return v;
}
Value u(ValueType t, uint64_t x) {
  Value v = scalar(t);
  v.u = x;
  return v;
}
Value i(ValueType t, int64_t x) {
  Value v = scalar(t);
  v.i = x;
  return v;
}
Value f(ValueType t, double x) {
  Value v = scalar(t);
  v.f = x;
  return v;
}
Value s(std::string x) {
  Value v = scalar(ValueType::STRING);
  v.str = std::move(x);
  return v;
}
Value boolean(bool x) {
  Value v = scalar(ValueType::BOOL);
  v.b = x;
  return v;
}
Value array(ValueType elem, std::vector<Value> xs) {
  Value v = scalar(ValueType::ARRAY);
  v.elem_type = elem;
  v.arr = std::move(xs);
  return v;
}

// Bitwise equality (NaN payloads and -0.0 included).
void expect_same(const Value& a, const Value& b, const std::string& where) {
  ASSERT_EQ(a.type, b.type) << where;
  switch (a.type) {
    case ValueType::UINT8:
    case ValueType::UINT16:
    case ValueType::UINT32:
    case ValueType::UINT64: EXPECT_EQ(a.u, b.u) << where; break;
    case ValueType::INT8:
    case ValueType::INT16:
    case ValueType::INT32:
    case ValueType::INT64: EXPECT_EQ(a.i, b.i) << where; break;
    case ValueType::FLOAT32: {
      const float x = static_cast<float>(a.f), y = static_cast<float>(b.f);
      EXPECT_EQ(std::memcmp(&x, &y, 4), 0) << where << ": " << x << " vs " << y;
      break;
    }
    case ValueType::FLOAT64: EXPECT_EQ(std::memcmp(&a.f, &b.f, 8), 0) << where; break;
    case ValueType::BOOL: EXPECT_EQ(a.b, b.b) << where; break;
    case ValueType::STRING: EXPECT_EQ(a.str, b.str) << where; break;
    case ValueType::ARRAY:
      ASSERT_EQ(a.elem_type, b.elem_type) << where;
      ASSERT_EQ(a.arr.size(), b.arr.size()) << where;
      for (size_t k = 0; k < a.arr.size(); ++k)
        expect_same(a.arr[k], b.arr[k], where + "[" + std::to_string(k) + "]");
      break;
  }
}

std::vector<std::pair<std::string, Value>> edge_values() {
  using VT = ValueType;
  const float f32_edges[] = {0.0f,
                             -0.0f,
                             1.0f,
                             std::numeric_limits<float>::min(),
                             std::numeric_limits<float>::denorm_min(),
                             std::numeric_limits<float>::max(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN()};
  const double f64_edges[] = {0.0,
                              -0.0,
                              std::numeric_limits<double>::denorm_min(),
                              std::numeric_limits<double>::lowest(),
                              std::numeric_limits<double>::infinity(),
                              std::numeric_limits<double>::quiet_NaN()};
  std::vector<std::pair<std::string, Value>> kv = {
      {"u8.min", u(VT::UINT8, 0)},
      {"u8.max", u(VT::UINT8, 255)},
      {"i8.min", i(VT::INT8, -128)},
      {"i8.max", i(VT::INT8, 127)},
      {"u16.max", u(VT::UINT16, 65535)},
      {"i16.min", i(VT::INT16, -32768)},
      {"i16.max", i(VT::INT16, 32767)},
      {"u32.max", u(VT::UINT32, UINT32_MAX)},
      {"i32.min", i(VT::INT32, INT32_MIN)},
      {"i32.max", i(VT::INT32, INT32_MAX)},
      {"u64.max", u(VT::UINT64, UINT64_MAX)},
      {"i64.min", i(VT::INT64, INT64_MIN)},
      {"i64.max", i(VT::INT64, INT64_MAX)},
      {"bool.false", boolean(false)},
      {"bool.true", boolean(true)},
      {"str.empty", s("")},
      {"str.utf8", s("h\xc3\xa9llo \xe2\x96\x81world")},
      {"str.nul", s(std::string("a\0b", 3))},
      {"str.long", s(std::string(100000, 'x'))},
      {"arr.empty", array(VT::UINT8, {})},
      {"arr.strings", array(VT::STRING, {s("<s>"), s(""), s("\xe2\x96\x81the")})},
      {"arr.bool", array(VT::BOOL, {boolean(true), boolean(false)})},
      {"arr.i64", array(VT::INT64, {i(VT::INT64, INT64_MIN), i(VT::INT64, -1)})},
      {"arr.nested",
       array(VT::ARRAY, {array(VT::INT32, {i(VT::INT32, 1), i(VT::INT32, -2)}),
                         array(VT::INT32, {}), array(VT::INT32, {i(VT::INT32, 3)})})},
      {"arr.nested3",
       array(VT::ARRAY, {array(VT::ARRAY, {array(VT::STRING, {s("deep")}),
                                           array(VT::FLOAT64, {f(VT::FLOAT64, 0.5)})})})},
      {"arr.nested_empty", array(VT::ARRAY, {})},
  };
  for (size_t k = 0; k < std::size(f32_edges); ++k)
    kv.emplace_back("f32." + std::to_string(k), f(VT::FLOAT32, f32_edges[k]));
  for (size_t k = 0; k < std::size(f64_edges); ++k)
    kv.emplace_back("f64." + std::to_string(k), f(VT::FLOAT64, f64_edges[k]));
  std::vector<Value> f32s, f64s;
  for (float x : f32_edges) f32s.push_back(f(VT::FLOAT32, x));
  for (double x : f64_edges) f64s.push_back(f(VT::FLOAT64, x));
  kv.emplace_back("arr.f32", array(VT::FLOAT32, f32s));
  kv.emplace_back("arr.f64", array(VT::FLOAT64, f64s));
  // One array of each integer type holding its extremes.
  kv.emplace_back("arr.u8", array(VT::UINT8, {u(VT::UINT8, 0), u(VT::UINT8, 255)}));
  kv.emplace_back("arr.i8", array(VT::INT8, {i(VT::INT8, -128), i(VT::INT8, 127)}));
  kv.emplace_back("arr.u16", array(VT::UINT16, {u(VT::UINT16, 65535)}));
  kv.emplace_back("arr.i16", array(VT::INT16, {i(VT::INT16, -32768)}));
  kv.emplace_back("arr.u32", array(VT::UINT32, {u(VT::UINT32, UINT32_MAX)}));
  kv.emplace_back("arr.i32", array(VT::INT32, {i(VT::INT32, INT32_MIN)}));
  kv.emplace_back("arr.u64", array(VT::UINT64, {u(VT::UINT64, UINT64_MAX)}));
  return kv;
}

TEST(GgufRoundTrip, EveryValueTypeWithEdgeValues) {
  Writer w;
  const auto kv = edge_values();
  for (const auto& [k, v] : kv) w.set(k, v);
  const auto bytes = w.to_bytes();
  auto file = File::from_memory(bytes.data(), bytes.size(), "mem.gguf");
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_TRUE(file->tensors().empty());
  ASSERT_EQ(file->metadata().size(), kv.size());
  for (size_t k = 0; k < kv.size(); ++k) {
    EXPECT_EQ(file->metadata()[k].first, kv[k].first);  // insertion order is kept
    expect_same(file->metadata()[k].second, kv[k].second, kv[k].first);
    const Value* found = file->find(kv[k].first);
    ASSERT_NE(found, nullptr) << kv[k].first;
    EXPECT_EQ(found, &file->metadata()[k].second);
  }
  EXPECT_EQ(file->find("missing"), nullptr);
  EXPECT_FALSE(file->has("u8"));
}

TEST(GgufRoundTrip, SetReplacesInPlace) {
  Writer w;
  w.set_u32("a", 1);
  w.set_string("b", "x");
  w.set_u32("a", 2);
  const auto bytes = w.to_bytes();
  auto file = File::from_memory(bytes.data(), bytes.size(), "mem.gguf");
  ASSERT_EQ(file->metadata().size(), 2u);
  EXPECT_EQ(file->metadata()[0].first, "a");
  EXPECT_EQ(file->require_uint("a"), 2u);
}

TEST(GgufRoundTrip, TypedSettersAndGetters) {
  Writer w;
  w.set_u32("u32", 7);
  w.set_i32("i32", -7);
  w.set_u64("u64", UINT64_MAX);
  w.set_f32("f32", 0.25f);
  w.set_bool("bool", true);
  w.set_string("str", "llama");
  w.set_string_array("strs", {"a", "", "ccc"});
  w.set_i32_array("i32s", {INT32_MIN, 0, INT32_MAX});
  w.set_u32_array("u32s", {0, UINT32_MAX});
  w.set_f32_array("f32s", {1.5f, -2.0f});
  w.set_bool_array("bools", {true, false, true});
  const auto bytes = w.to_bytes();
  auto file = File::from_memory(bytes.data(), bytes.size(), "m.gguf");

  EXPECT_EQ(file->get_uint("u32"), 7u);
  EXPECT_EQ(file->get_int("u32"), 7);
  EXPECT_EQ(file->get_int("i32"), -7);
  EXPECT_EQ(file->get_uint("u64"), UINT64_MAX);
  EXPECT_EQ(file->get_float("f32"), 0.25);
  EXPECT_EQ(file->get_float("i32"), -7.0);  // integers convert to float
  EXPECT_EQ(file->get_bool("bool"), true);
  EXPECT_EQ(file->get_string("str"), "llama");
  EXPECT_EQ(file->require_string("str"), "llama");
  EXPECT_EQ(file->require_float("f32"), 0.25);
  EXPECT_EQ(file->get_string_array("strs"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(file->get_int_array("i32s"), (std::vector<int64_t>{INT32_MIN, 0, INT32_MAX}));
  EXPECT_EQ(file->get_int_array("u32s"), (std::vector<int64_t>{0, UINT32_MAX}));
  EXPECT_EQ(file->get_float_array("f32s"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(file->get_float_array("i32s")->at(2), static_cast<float>(INT32_MAX));
  const Value* bools = file->find("bools");
  ASSERT_NE(bools, nullptr);
  EXPECT_EQ(bools->elem_type, ValueType::BOOL);
  EXPECT_EQ(bools->to_string(), "[true, false, true]");
  EXPECT_EQ(file->find("strs")->to_string(2), "[\"a\", \"\", ... (3 items)]");
  EXPECT_FALSE(file->get_uint("absent").has_value());
  EXPECT_FALSE(file->get_string_array("absent").has_value());

  auto error_of = [&](auto fn) -> std::string {
    try {
      fn();
    } catch (const ft::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of([&] { file->get_uint("i32"); }),
            "m.gguf: metadata key 'i32' is -7, expected a value >= 0");
  EXPECT_EQ(error_of([&] { file->get_int("u64"); }),
            "m.gguf: metadata key 'u64' is 18446744073709551615, expected a value <= "
            "9223372036854775807");
  EXPECT_EQ(error_of([&] { file->get_string("u32"); }),
            "m.gguf: metadata key 'u32' has type uint32, expected string");
  EXPECT_EQ(error_of([&] { file->get_uint("str"); }),
            "m.gguf: metadata key 'str' has type string, expected an unsigned integer");
  EXPECT_EQ(error_of([&] { file->get_bool("u32"); }),
            "m.gguf: metadata key 'u32' has type uint32, expected bool");
  EXPECT_EQ(error_of([&] { file->get_float("strs"); }),
            "m.gguf: metadata key 'strs' has type array[string], expected a number");
  EXPECT_EQ(error_of([&] { file->get_string_array("i32s"); }),
            "m.gguf: metadata key 'i32s' has type array[int32], expected array[string]");
  EXPECT_EQ(error_of([&] { file->get_int_array("f32s"); }),
            "m.gguf: metadata key 'f32s' has type array[float32], expected an array of integers");
  EXPECT_EQ(error_of([&] { file->get_float_array("strs"); }),
            "m.gguf: metadata key 'strs' has type array[string], expected an array of numbers");
  EXPECT_EQ(error_of([&] { file->require_uint("nope"); }), "m.gguf: missing metadata key 'nope'");
  EXPECT_EQ(error_of([&] { file->require_string("nope"); }), "m.gguf: missing metadata key 'nope'");
  EXPECT_EQ(error_of([&] { file->require_float("nope"); }), "m.gguf: missing metadata key 'nope'");
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<uint8_t>(seed + k * 31);
  return v;
}

struct TensorCase {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  uint64_t nbytes;
};

void check_tensors(uint32_t alignment) {
  const std::vector<TensorCase> cases = {
      {"f32.1d", GgmlType::F32, {5}, 20},
      {"f16.2d", GgmlType::F16, {3, 2}, 12},
      {"bf16.4d", GgmlType::BF16, {2, 1, 3, 2}, 24},
      {"q8_0", GgmlType::Q8_0, {64, 3}, 2 * 34 * 3},
      {"q4_K", GgmlType::Q4_K, {256, 2}, 288},
      {"nvfp4.3d", GgmlType::NVFP4, {128, 2, 2}, 2 * 36 * 4},
      {"i32.scalar", GgmlType::I32, {}, 4},
      {"empty", GgmlType::F32, {0, 4}, 0},
      {"f32.tail", GgmlType::F32, {64}, 256},
  };
  Writer w(alignment);
  w.set_string("general.architecture", "llama");
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto& c = cases[k];
    if (k % 2)
      w.add_tensor_stream(c.name, c.type, c.ne, [&, k](uint8_t* dst, uint64_t n) {
        EXPECT_EQ(n, c.nbytes);
        auto p = pattern(n, static_cast<uint8_t>(k));
        std::copy(p.begin(), p.end(), dst);
      });
    else
      w.add_tensor(c.name, c.type, c.ne, pattern(c.nbytes, static_cast<uint8_t>(k)));
  }
  const auto bytes = w.to_bytes();
  auto file = File::from_memory(bytes.data(), bytes.size(), "mem.gguf");
  EXPECT_EQ(file->alignment(), alignment);
  EXPECT_EQ(file->data_offset() % alignment, 0u);
  EXPECT_EQ(file->get_uint("general.alignment").value_or(32), alignment);
  ASSERT_EQ(file->tensors().size(), cases.size());
  uint64_t expected_offset = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto& c = cases[k];
    const TensorInfo& t = file->tensors()[k];
    EXPECT_EQ(t.name, c.name);
    EXPECT_EQ(t.type, c.type);
    EXPECT_EQ(t.n_dims, static_cast<int>(c.ne.size()));
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(t.ne[d], d < static_cast<int>(c.ne.size()) ? c.ne[d] : 1) << c.name << " dim " << d;
    EXPECT_EQ(t.nbytes, c.nbytes) << c.name;
    EXPECT_EQ(t.offset, expected_offset) << c.name;
    EXPECT_EQ(t.data, file->base() + file->data_offset() + t.offset);
    EXPECT_EQ(static_cast<uint64_t>(t.data - file->base()) % alignment, 0u) << c.name;
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), pattern(c.nbytes, static_cast<uint8_t>(k)))
        << c.name;
    EXPECT_EQ(file->find_tensor(c.name), &t);
    expected_offset += (c.nbytes + alignment - 1) / alignment * alignment;
  }
  EXPECT_EQ(file->tensors()[0].shape_string(), "[5]");
  EXPECT_EQ(file->tensors()[5].shape_string(), "[128, 2, 2]");
  EXPECT_EQ(file->tensors()[6].shape_string(), "[]");
  EXPECT_EQ(file->tensors()[4].row_bytes(), 144);
  EXPECT_EQ(file->tensors()[5].n_rows(), 4);
  EXPECT_EQ(file->find_tensor("nope"), nullptr);
  EXPECT_EQ(bytes.size(), file->data_offset() + expected_offset);  // last tensor padded too
}

TEST(GgufRoundTrip, TensorsDefaultAlignment) { check_tensors(32); }
TEST(GgufRoundTrip, TensorsAlignment64) { check_tensors(64); }
TEST(GgufRoundTrip, TensorsAlignment1) { check_tensors(1); }

TEST(GgufRoundTrip, FileWriteAndMmapOpen) {
  Writer w;
  w.set_string("general.architecture", "qwen3");
  w.add_tensor("w", GgmlType::Q8_0, {32, 2}, pattern(68, 3));
  const std::string path = ::testing::TempDir() + "gguf_rt_" + std::to_string(::getpid()) + ".gguf";
  w.write(path);
  {
    auto file = File::open(path);
    EXPECT_EQ(file->path(), path);
    EXPECT_EQ(file->file_size(), w.to_bytes().size());
    EXPECT_EQ(std::vector<uint8_t>(file->base(), file->base() + file->file_size()), w.to_bytes());
    EXPECT_EQ(file->require_string("general.architecture"), "qwen3");
    EXPECT_EQ(std::vector<uint8_t>(file->tensors()[0].data, file->tensors()[0].data + 68),
              pattern(68, 3));
  }
  EXPECT_NE(::access((path + ".tmp." + std::to_string(::getpid())).c_str(), F_OK), 0);  // renamed into place
  std::remove(path.c_str());
  try {
    File::open(path);
    FAIL() << "opened a missing file";
  } catch (const ft::Error& e) {
    EXPECT_THAT(e.what(), StartsWith(path + ": cannot open: "));
  }
  try {
    File::open(::testing::TempDir());
    FAIL() << "opened a directory";
  } catch (const ft::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a regular file"));
  }
}

TEST(GgufRoundTrip, EmptyFileOnDisk) {
  const std::string path = ::testing::TempDir() + "gguf_empty_" + std::to_string(::getpid()) + ".gguf";
  std::fclose(std::fopen(path.c_str(), "wb"));
  try {
    File::open(path);
    FAIL();
  } catch (const ft::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": truncated file: header needs 4 bytes at offset 0, file has 0");
  }
  std::remove(path.c_str());
}

// The exact bytes gguf-py's GGUFWriter produces for this content (assembled by hand from
// write_header_to_file / write_kv_data_to_file / write_ti_data_to_file / write_tensors_to_file).
TEST(GgufRoundTrip, ExactBytesMatchGgufPyLayout) {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  w.set_f32_array("a", {1.0f});
  w.add_tensor("t0", GgmlType::F32, {3}, pattern(12, 1));
  w.add_tensor("t1", GgmlType::F16, {2, 2}, pattern(8, 2));

  test::Raw r;
  r.header(2, 3).kv_str("general.architecture", "llama").kv_u32("llama.block_count", 1);
  r.str("a").put<int32_t>(9).put<int32_t>(6).put<uint64_t>(1).put<float>(1.0f);
  r.tensor("t0", {3}, 0, 0).tensor("t1", {2, 2}, 1, 32).pad(32);
  auto d0 = pattern(12, 1), d1 = pattern(8, 2);
  r.b.insert(r.b.end(), d0.begin(), d0.end());
  r.pad(32);
  r.b.insert(r.b.end(), d1.begin(), d1.end());
  r.pad(32);
  EXPECT_EQ(w.to_bytes(), r.b);

  // No tensors: gguf-py still pads the end of the metadata to the alignment.
  Writer w2;
  w2.set_u32("k", 5);
  test::Raw r2;
  r2.header(0, 1).kv_u32("k", 5).pad(32);
  EXPECT_EQ(w2.to_bytes(), r2.b);
  // A non-default alignment is recorded as general.alignment, first.
  Writer w3(64);
  const auto b3 = w3.to_bytes();
  test::Raw r3;
  r3.header(0, 1).kv_u32("general.alignment", 64).pad(64);
  EXPECT_EQ(b3, r3.b);
}

TEST(GgufRoundTrip, Version2IsAccepted) {
  Writer w;
  w.set_u32("k", 5);
  w.add_tensor("t", GgmlType::F32, {1}, pattern(4, 0));
  auto bytes = w.to_bytes();
  bytes[4] = 2;
  auto file = File::from_memory(bytes.data(), bytes.size(), "v2.gguf");
  EXPECT_EQ(file->version(), 2u);
  EXPECT_EQ(file->tensors().size(), 1u);
}

// llama.cpp pads the data section only when there are tensors, so a file that ends
// right after its metadata is valid.
TEST(GgufRoundTrip, NoTensorsNeedsNoPadding) {
  test::Raw r;
  r.header(0, 1).kv_u32("k", 5);
  auto file = File::from_memory(r.b.data(), r.b.size(), "np.gguf");
  EXPECT_EQ(file->data_offset(), r.b.size());
}

TEST(GgufWriter, RefusesBadInput) {
  auto error_of = [](auto fn) -> std::string {
    try {
      fn();
    } catch (const ft::Error& e) {
      return e.what();
    }
    return "";
  };
  Writer w;
  w.add_tensor("a", GgmlType::F32, {2}, pattern(8, 0));
  EXPECT_THAT(error_of([&] { w.add_tensor("a", GgmlType::F32, {2}, pattern(8, 0)); }),
              HasSubstr("duplicate tensor name 'a'"));
  EXPECT_THAT(error_of([&] { w.add_tensor("b", GgmlType::F32, {2}, pattern(7, 0)); }),
              HasSubstr("tensor 'b' has 7 bytes of data, expected 8"));
  EXPECT_THAT(error_of([&] { w.add_tensor("c", GgmlType::Q8_0, {33}, {}); }),
              HasSubstr("expected a multiple of 32"));
  EXPECT_THAT(error_of([&] { w.add_tensor(std::string(64, 'n'), GgmlType::F32, {1}, pattern(4, 0)); }),
              HasSubstr("expected at most 63"));
  EXPECT_THAT(error_of([&] { w.add_tensor("d", GgmlType::F32, {1, 1, 1, 1, 1}, pattern(4, 0)); }),
              HasSubstr("expected at most 4"));
  EXPECT_THAT(error_of([&] { w.add_tensor("e", GgmlType::F32, {-1}, {}); }), HasSubstr("expected >= 0"));
  EXPECT_THAT(error_of([] { Writer bad(48); }), HasSubstr("alignment 48"));
  EXPECT_THAT(error_of([&] { w.set_u64("general.alignment", 32); }), HasSubstr("general.alignment"));
  Value mixed = array(ValueType::INT32, {i(ValueType::INT32, 1), u(ValueType::UINT32, 2)});
  EXPECT_THAT(error_of([&] { w.set("m", mixed); }), HasSubstr("array of int32 but has a uint32 element"));
  const std::string tmp = "/nonexistent-dir/x.gguf.tmp." + std::to_string(::getpid());
  EXPECT_THAT(error_of([&] { w.write("/nonexistent-dir/x.gguf"); }), HasSubstr(tmp + ": cannot open for writing"));
  Value bad_elem = array(static_cast<ValueType>(99), {});
  EXPECT_THAT(error_of([&] { w.set("b", bad_elem); }), HasSubstr("unknown array element type 99"));
}

}  // namespace
}  // namespace ft::gguf
