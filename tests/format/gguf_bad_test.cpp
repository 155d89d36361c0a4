// Broken GGUF files, generated here: every one must give an ft::Error whose message
// starts with the file name and names the problem; none may crash or read outside the
// buffer (run under ASan: cmake -DFT_SANITIZE=ON).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "gguf_raw.h"

namespace ft::gguf {
namespace {

using test::parse_error;
using test::Raw;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int32_t kF32 = 0, kQ8_0 = 8;

#define EXPECT_GGUF_ERROR(bytes, text)                          \
  do {                                                          \
    const std::string msg_ = parse_error(bytes);                \
    EXPECT_THAT(msg_, StartsWith("bad.gguf: ")) << "parsed OK"; \
    EXPECT_THAT(msg_, HasSubstr(text));                         \
  } while (0)

// A small valid file: 3 KVs (incl. a string array), 3 tensors whose sizes are multiples of
// 32, so the file ends exactly at the end of the last tensor's data.
std::vector<uint8_t> small_valid_file() {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_string_array("tokenizer.ggml.tokens", {"<s>", "a", "bc"});
  w.add_tensor("token_embd.weight", GgmlType::F32, {8, 2}, std::vector<uint8_t>(64, 1));
  w.add_tensor("blk.0.attn_q.weight", GgmlType::F16, {16, 2}, std::vector<uint8_t>(64, 2));
  w.add_tensor("output.weight", GgmlType::F32, {8}, std::vector<uint8_t>(32, 3));
  return w.to_bytes();
}

TEST(GgufBad, SmallValidFileParses) {
  const auto b = small_valid_file();
  EXPECT_EQ(parse_error(b), "");
  auto f = File::from_memory(b.data(), b.size(), "ok.gguf");
  EXPECT_EQ(f->data_offset() + f->tensors().back().offset + f->tensors().back().nbytes, b.size());
}

// Cutting the file at any byte must be refused (the last tensor has no tail padding).
TEST(GgufBad, TruncationAtEveryByte) {
  const auto b = small_valid_file();
  for (size_t n = 0; n < b.size(); ++n) {
    const std::string msg = parse_error(b, n);
    EXPECT_THAT(msg, StartsWith("bad.gguf: truncated file: ")) << "cut at " << n;
    EXPECT_THAT(msg, HasSubstr(fmt::format("file has {}", n))) << "cut at " << n;
  }
}

// With tail padding after the last tensor, cutting only padding is accepted (llama.cpp
// checks the unpadded end), cutting into data is not.
TEST(GgufBad, TruncationOfTailPadding) {
  Writer w;
  w.add_tensor("t", GgmlType::F32, {3}, std::vector<uint8_t>(12, 1));
  const auto b = w.to_bytes();
  auto f = File::from_memory(b.data(), b.size(), "ok.gguf");
  const size_t end = f->data_offset() + 12;
  ASSERT_LT(end, b.size());
  for (size_t n = end; n <= b.size(); ++n) EXPECT_EQ(parse_error(b, n), "") << n;
  EXPECT_EQ(parse_error(b, end - 1),
            fmt::format("bad.gguf: truncated file: tensor 't' data needs 12 bytes at offset {}, "
                        "file has {}",
                        f->data_offset(), end - 1));
}

TEST(GgufBad, TruncationMessageNamesTheKey) {
  Raw r;
  r.header(0, 1).kv_str("general.name", "hello world!");  // 12 bytes of value
  const size_t value_at = r.b.size() - 12;
  EXPECT_EQ(parse_error(r.b, r.b.size() - 3),
            fmt::format("bad.gguf: truncated file: metadata key 'general.name' needs 12 bytes at "
                        "offset {}, file has {}",
                        value_at, r.b.size() - 3));
}

// Flip every bit of the header, metadata and tensor infos: the parser must either accept
// the result or throw ft::Error (anything else fails the test or trips ASan).
TEST(GgufBad, BitFlipsInHeaderAndInfos) {
  const auto good = small_valid_file();
  auto f = File::from_memory(good.data(), good.size(), "ok.gguf");
  const size_t infos_end = f->data_offset();
  int errors = 0, accepted = 0;
  for (size_t byte = 0; byte < infos_end; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      auto b = good;
      b[byte] ^= static_cast<uint8_t>(1u << bit);
      try {
        auto g = File::from_memory(b.data(), b.size(), "flip.gguf");
        for (const auto& t : g->tensors()) ASSERT_LE(t.data + t.nbytes, b.data() + b.size());
        ++accepted;
      } catch (const ft::Error& e) {
        EXPECT_THAT(e.what(), StartsWith("flip.gguf: "));
        ++errors;
      }
    }
  }
  // Most flips (magic, version, counts, lengths, types, offsets) must be caught.
  EXPECT_GT(errors, accepted / 2);
  EXPECT_GT(accepted, 0);  // flips inside key/tensor name bytes or values are legal files
}

TEST(GgufBad, Magic) {
  Raw r;
  r.bytes("GGML").put<uint32_t>(3).put<int64_t>(0).put<int64_t>(0);
  EXPECT_GGUF_ERROR(r.b, "not a GGUF file: magic is 'GGML', expected 'GGUF'");
  Raw r2;
  r2.bytes(std::string("\x00\x01GU", 4)).put<uint32_t>(3).put<int64_t>(0).put<int64_t>(0);
  EXPECT_GGUF_ERROR(r2.b, "magic is '\\x00\\x01GU'");
}

TEST(GgufBad, Versions) {
  EXPECT_GGUF_ERROR(Raw().header(0, 0, 0).b, "bad GGUF version 0, expected 2 or 3");
  EXPECT_GGUF_ERROR(Raw().header(0, 0, 1).b, "GGUFv1 is no longer supported");
  EXPECT_GGUF_ERROR(Raw().header(0, 0, 4).b, "GGUF version 4 is not supported, expected 2 or 3");
  EXPECT_GGUF_ERROR(Raw().header(0, 0, 0x03000000).b, "big-endian GGUF files are not supported");
  EXPECT_GGUF_ERROR(Raw().header(0, 0, 0x02000000).b, "big-endian GGUF files are not supported");
}

TEST(GgufBad, Counts) {
  EXPECT_GGUF_ERROR(Raw().header(-1, 0).b, "tensor count is -1, expected >= 0");
  EXPECT_GGUF_ERROR(Raw().header(0, -5).b, "metadata key count is -5, expected >= 0");
  EXPECT_GGUF_ERROR(Raw().header(0, int64_t{1} << 62).b,
                    "header says 4611686018427387904 metadata keys");
  EXPECT_GGUF_ERROR(Raw().header(INT64_MAX, 0).b, "header says 9223372036854775807 tensors");
  EXPECT_GGUF_ERROR(Raw().header(0, 2).kv_u32("a", 1).put<uint64_t>(50).zeros(4).b,
                    "truncated file: metadata key #1 needs 50 bytes at offset 49, file has 53");
}

TEST(GgufBad, ValueTypes) {
  Raw r;
  r.header(0, 1).str("x").put<int32_t>(13).zeros(8);
  EXPECT_GGUF_ERROR(r.b, "metadata key 'x' has unknown value type id 13");
  Raw r2;
  r2.header(0, 1).str("x").put<int32_t>(-1).zeros(8);
  EXPECT_GGUF_ERROR(r2.b, "metadata key 'x' has unknown value type id -1");
  Raw r3;
  r3.header(0, 1).str("arr").put<int32_t>(9).put<int32_t>(77).put<uint64_t>(1).zeros(8);
  EXPECT_GGUF_ERROR(r3.b, "metadata key 'arr' array element type has unknown value type id 77");
  Raw r4;
  r4.header(0, 1).str("").put<int32_t>(4).put<uint32_t>(1);
  EXPECT_GGUF_ERROR(r4.b, "metadata key #0 is empty");
}

TEST(GgufBad, HugeStringsAndArrays) {
  Raw r;
  r.header(0, 1).str("s").put<int32_t>(8).put<uint64_t>(uint64_t{1} << 40).zeros(16);
  EXPECT_GGUF_ERROR(r.b, "metadata key 's' has a string of 1099511627776 bytes at offset");
  EXPECT_GGUF_ERROR(r.b, "expected at most 1073741824 (1 GiB)");
  Raw r2;
  r2.header(0, 1).str("a").put<int32_t>(9).put<int32_t>(4).put<uint64_t>(uint64_t{1} << 31).zeros(16);
  EXPECT_GGUF_ERROR(r2.b, "metadata key 'a' is an array of 2147483648 elements, expected at most "
                          "1073741824 (2^30)");
  // Within the limit but far more than the file holds: refused before allocating.
  Raw r3;
  r3.header(0, 1).str("a").put<int32_t>(9).put<int32_t>(8).put<uint64_t>(uint64_t{1} << 29).zeros(16);
  EXPECT_GGUF_ERROR(r3.b, "truncated file: metadata key 'a' is an array of 536870912 string "
                          "elements needing at least 4294967296 bytes");
  // A key longer than the file.
  Raw r4;
  r4.header(0, 1).put<uint64_t>(1000).bytes("abcdefgh");
  EXPECT_GGUF_ERROR(r4.b, "truncated file: metadata key #0 needs 1000 bytes at offset 32, file has 40");
}

TEST(GgufBad, NestedArraysTooDeep) {
  Raw r;
  r.header(0, 1).str("n").put<int32_t>(9);
  for (int d = 0; d < 20; ++d) r.put<int32_t>(9).put<uint64_t>(1);
  r.put<int32_t>(4).put<uint64_t>(0);
  EXPECT_GGUF_ERROR(r.b, "metadata key 'n' has arrays nested more than 8 deep");
  // Depth 7 (within the limit) parses.
  Raw ok;
  ok.header(0, 1).str("n").put<int32_t>(9);
  for (int d = 0; d < 6; ++d) ok.put<int32_t>(9).put<uint64_t>(1);
  ok.put<int32_t>(4).put<uint64_t>(1).put<uint32_t>(42);
  EXPECT_EQ(parse_error(ok.b), "");
}

TEST(GgufBad, DuplicateKeys) {
  Raw r;
  r.header(0, 3).kv_u32("a", 1).kv_u32("b", 2).kv_str("a", "x");
  EXPECT_GGUF_ERROR(r.b, "duplicate metadata key 'a' (keys #0 and #2)");
}

TEST(GgufBad, Alignment) {
  Raw r;
  r.header(0, 1).kv_u32("general.alignment", 48);
  EXPECT_GGUF_ERROR(r.b, "general.alignment is 48, expected a non-zero power of two");
  Raw r0;
  r0.header(0, 1).kv_u32("general.alignment", 0);
  EXPECT_GGUF_ERROR(r0.b, "general.alignment is 0, expected a non-zero power of two");
  Raw r2;
  r2.header(0, 1).str("general.alignment").put<int32_t>(10).put<uint64_t>(32);
  EXPECT_GGUF_ERROR(r2.b, "metadata key 'general.alignment' has type uint64, expected uint32");
  Raw r3;
  r3.header(0, 1).kv_str("general.alignment", "32");
  EXPECT_GGUF_ERROR(r3.b, "metadata key 'general.alignment' has type string, expected uint32");
}

// Header + one u32 KV + the given tensor infos, padded, plus `data` zero bytes.
Raw with_tensors(const std::function<void(Raw&)>& infos, int64_t n_tensors, size_t data) {
  Raw r;
  r.header(n_tensors, 1).kv_u32("k", 1);
  infos(r);
  return r.pad(32).zeros(data);
}

TEST(GgufBad, TensorNames) {
  auto r = with_tensors([](Raw& r) { r.tensor(std::string(64, 'x'), {4}, kF32, 0); }, 1, 32);
  EXPECT_GGUF_ERROR(r.b, "tensor #0 name is 64 bytes long, expected at most 63");
  auto ok = with_tensors([](Raw& r) { r.tensor(std::string(63, 'x'), {4}, kF32, 0); }, 1, 32);
  EXPECT_EQ(parse_error(ok.b), "");
  auto nul = with_tensors([](Raw& r) { r.tensor(std::string("a\0b", 3), {4}, kF32, 0); }, 1, 32);
  EXPECT_GGUF_ERROR(nul.b, "tensor #0 name 'a\\x00b' contains a NUL byte");
  auto dup = with_tensors(
      [](Raw& r) {
        r.tensor("w", {8}, kF32, 0).tensor("v", {8}, kF32, 32).tensor("w", {8}, kF32, 64);
      },
      3, 96);
  EXPECT_GGUF_ERROR(dup.b, "duplicate tensor name 'w' (tensors #0 and #2)");
}

// Names come from the file: control bytes are escaped and long names shortened in errors.
TEST(GgufBad, NamesInErrorsAreEscaped) {
  auto r = with_tensors([](Raw& r) { r.tensor("w\x1b[31m", {4, -1}, kF32, 0); }, 1, 32);
  EXPECT_GGUF_ERROR(r.b, "tensor 'w\\x1b[31m' dimension 1 is -1");
  Raw k;
  k.header(0, 1).str(std::string(1000, 'k')).put<int32_t>(4).put<uint16_t>(0);
  EXPECT_GGUF_ERROR(k.b, "truncated file: metadata key '" + std::string(128, 'k') +
                             "...(1000 bytes)' needs 4 bytes at offset 1036, file has 1038");
}

TEST(GgufBad, TensorShapes) {
  EXPECT_GGUF_ERROR(with_tensors([](Raw& r) { r.tensor("w", {1, 1, 1, 1, 1}, kF32, 0); }, 1, 32).b,
                    "tensor 'w' has 5 dimensions, expected at most 4");
  EXPECT_GGUF_ERROR(with_tensors([](Raw& r) { r.tensor("w", {4, -2}, kF32, 0); }, 1, 32).b,
                    "tensor 'w' dimension 1 is -2, expected >= 0");
  EXPECT_GGUF_ERROR(with_tensors([](Raw& r) { r.tensor("w", {33}, kQ8_0, 0); }, 1, 64).b,
                    "tensor 'w' of type q8_0 has 33 elements per row, expected a multiple of the "
                    "block size 32");
  const int64_t big = int64_t{1} << 32;
  EXPECT_GGUF_ERROR(with_tensors([&](Raw& r) { r.tensor("w", {big, big, 4}, kF32, 0); }, 1, 32).b,
                    "tensor 'w' with shape [4294967296, 4294967296, 4] and type f32 is too large");
  // Element count fits in int64, byte size does not.
  EXPECT_GGUF_ERROR(
      with_tensors([&](Raw& r) { r.tensor("w", {int64_t{1} << 62}, kF32, 0); }, 1, 32).b,
      "is too large");
  // Zero-sized dims are legal (nothing to read).
  EXPECT_EQ(parse_error(with_tensors([](Raw& r) { r.tensor("w", {0, 5}, kF32, 0); }, 1, 0).b), "");
}

TEST(GgufBad, TensorTypes) {
  EXPECT_GGUF_ERROR(with_tensors([](Raw& r) { r.tensor("w", {32}, 4, 0); }, 1, 32).b,
                    "tensor 'w' has ggml type id 4, which was removed from ggml");
  EXPECT_GGUF_ERROR(with_tensors([](Raw& r) { r.tensor("w", {32}, 37, 0); }, 1, 32).b,
                    "ggml type id 37, which was removed");
  EXPECT_GGUF_ERROR(with_tensors([](Raw& r) { r.tensor("w", {32}, 43, 0); }, 1, 32).b,
                    "tensor 'w' has unknown ggml type id 43, expected 0..42");
  EXPECT_GGUF_ERROR(with_tensors([](Raw& r) { r.tensor("w", {32}, -1, 0); }, 1, 32).b,
                    "unknown ggml type id -1");
}

TEST(GgufBad, TensorOffsets) {
  // a: 40 bytes -> padded 64; b must be at 64.
  auto gap = with_tensors([](Raw& r) { r.tensor("a", {10}, kF32, 0).tensor("b", {8}, kF32, 96); },
                          2, 160);
  EXPECT_GGUF_ERROR(gap.b, "tensor 'b' has offset 96, expected 64");
  auto overlap = with_tensors(
      [](Raw& r) { r.tensor("a", {10}, kF32, 0).tensor("b", {8}, kF32, 40); }, 2, 160);
  EXPECT_GGUF_ERROR(overlap.b, "tensor 'b' has offset 40, expected 64");
  auto swapped = with_tensors(
      [](Raw& r) { r.tensor("a", {8}, kF32, 32).tensor("b", {8}, kF32, 0); }, 2, 64);
  EXPECT_GGUF_ERROR(swapped.b, "tensor 'a' has offset 32, expected 0");
  auto huge = with_tensors([](Raw& r) { r.tensor("a", {8}, kF32, UINT64_MAX); }, 1, 32);
  EXPECT_GGUF_ERROR(huge.b, "tensor 'a' has offset 18446744073709551615, expected 0");
}

TEST(GgufBad, TensorDataPastEnd) {
  auto r = with_tensors([](Raw& r) { r.tensor("a", {8}, kF32, 0).tensor("b", {64}, kF32, 32); },
                        2, 100);
  EXPECT_GGUF_ERROR(r.b, "truncated file: tensor 'b' data needs 256 bytes at offset");
  // Infos end but the padding up to the data section is missing.
  Raw nopad;
  nopad.header(1, 0).tensor("a", {0}, kF32, 0);
  EXPECT_GGUF_ERROR(nopad.b, "truncated file: tensor data should start at offset 64");
  // A huge tensor whose size fits in 64 bits but not in the file.
  auto big = with_tensors([](Raw& r) { r.tensor("a", {int64_t{1} << 40}, kF32, 0); }, 1, 32);
  EXPECT_GGUF_ERROR(big.b, "tensor 'a' data needs 4398046511104 bytes");
}

// The committed broken files (tests/data/bad/, made by fuzz/make_corpus.py) must all be
// refused with a message naming the file.
TEST(GgufBad, CommittedBadFiles) {
  const std::string dir = std::string(FT_SOURCE_DIR) + "/tests/data/bad/";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated_kv.gguf", "truncated file: metadata key 'general.name'"},
      {"truncated_data.gguf", "truncated file: tensor 'output.weight' data"},
      {"bad_magic.gguf", "magic is 'GGML'"},
      {"version1.gguf", "GGUFv1 is no longer supported"},
      {"big_endian.gguf", "big-endian GGUF files are not supported"},
      {"bad_offset.gguf", "tensor 'blk.0.attn_norm.weight' has offset 256, expected 288"},
      {"bad_alignment.gguf", "general.alignment is 48"},
      {"alignment_wrong_type.gguf", "'general.alignment' has type uint64, expected uint32"},
      {"duplicate_key.gguf", "duplicate metadata key 'general.name'"},
      {"duplicate_tensor.gguf", "duplicate tensor name 'output.weight'"},
      {"unknown_value_type.gguf", "metadata key 'x' has unknown value type id 13"},
      {"removed_ggml_type.gguf", "tensor 'w' has ggml type id 4, which was removed"},
      {"block_size.gguf", "tensor 'w' of type q8_0 has 33 elements per row"},
      {"huge_array.gguf", "is an array of 2147483648 elements"},
      {"huge_string.gguf", "has a string of 1099511627776 bytes"},
      {"dims_overflow.gguf", "tensor 'w' with shape [4294967296, 4294967296, 4]"},
  };
  for (const auto& [name, text] : cases) {
    try {
      File::open(dir + name);
      ADD_FAILURE() << name << " parsed";
    } catch (const ft::Error& e) {
      EXPECT_THAT(e.what(), StartsWith(dir + name + ": ")) << name;
      EXPECT_THAT(e.what(), HasSubstr(text)) << name;
    }
  }
  // And every valid seed in the fuzz corpus parses.
  for (const char* name : {"valid_tiny.gguf", "valid_all_types.gguf", "valid_v2_no_tensors.gguf",
                           "valid_align64.gguf", "valid_empty.gguf"}) {
    const std::string path = std::string(FT_SOURCE_DIR) + "/fuzz/corpus/" + name;
    EXPECT_NO_THROW(File::open(path)) << path;
  }
}

}  // namespace
}  // namespace ft::gguf
