// GGUF compatibility with llama.cpp's own gguf code (libggml-base): files our Writer
// makes load in gguf_init_from_file with the same values, tensors and offsets; ggml's
// writer produces the same bytes for the same content; files ggml writes read back in
// our reader; and llama.cpp loads a vocab-only model we wrote and tokenizes with it.
#include <ggml-backend.h>
#include <ggml.h>
#include <gguf.h>
#include <gtest/gtest.h>
#include <llama.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include "format/gguf.h"
#include "format/gguf_writer.h"

namespace ft::gguf {
namespace {

std::string temp_path(const std::string& stem) {
  return ::testing::TempDir() + stem + "_" + std::to_string(::getpid()) + ".gguf";
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<uint8_t>(seed * 13 + k * 7);
  return v;
}

struct TensorSpec {
  const char* name;
  GgmlType type;
  std::vector<int64_t> ne;  // last dim != 1: ggml writes ggml_n_dims, which drops trailing 1s
};

const std::vector<TensorSpec>& tensor_specs() {
  static const std::vector<TensorSpec> specs = {
      {"token_embd.weight", GgmlType::Q8_0, {64, 3}},
      {"blk.0.attn_norm.weight", GgmlType::F32, {5}},
      {"blk.0.ffn_gate.weight", GgmlType::Q4_K, {256, 2}},
      {"blk.0.ffn_up.weight", GgmlType::NVFP4, {128, 2, 3}},
      {"blk.0.ffn_up.scale", GgmlType::F32, {1}},
      {"output.weight", GgmlType::BF16, {2, 3, 4, 5}},
      {"pos", GgmlType::I32, {7}},
  };
  return specs;
}

uint64_t spec_nbytes(const TensorSpec& s) {
  const auto& tr = traits(s.type);
  uint64_t n = static_cast<uint64_t>(s.ne[0] / tr.block_size * tr.type_size);
  for (size_t d = 1; d < s.ne.size(); ++d) n *= static_cast<uint64_t>(s.ne[d]);
  return n;
}

// The same content, through our Writer.
Writer our_writer() {
  Writer w;
  w.set_string("general.architecture", "llama");
  Value v;
  v.type = ValueType::UINT8, v.u = 200, w.set("t.u8", v);
  v = {}, v.type = ValueType::INT8, v.i = -100, w.set("t.i8", v);
  v = {}, v.type = ValueType::UINT16, v.u = 65000, w.set("t.u16", v);
  v = {}, v.type = ValueType::INT16, v.i = -32000, w.set("t.i16", v);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_f32("t.f32", -0.125f);
  w.set_u64("t.u64", UINT64_MAX);
  v = {}, v.type = ValueType::INT64, v.i = INT64_MIN, w.set("t.i64", v);
  v = {}, v.type = ValueType::FLOAT64, v.f = 1e300, w.set("t.f64", v);
  w.set_bool("t.bool", true);
  w.set_string("t.str", "h\xc3\xa9llo");
  w.set_string_array("t.strs", {"<s>", "", "\xe2\x96\x81the"});
  w.set_i32_array("t.i32s", {1, -2, 3});
  w.set_f32_array("t.f32s", {0.5f, -1.0f});
  for (size_t k = 0; k < tensor_specs().size(); ++k) {
    const auto& s = tensor_specs()[k];
    w.add_tensor(s.name, s.type, s.ne, pattern(spec_nbytes(s), static_cast<uint8_t>(k)));
  }
  return w;
}

// The same content, through ggml's gguf API. Returns the ggml context holding the tensors.
gguf_context* ggml_writer(ggml_context** tctx) {
  gguf_context* g = gguf_init_empty();
  gguf_set_val_str(g, "general.architecture", "llama");
  gguf_set_val_u8(g, "t.u8", 200);
  gguf_set_val_i8(g, "t.i8", -100);
  gguf_set_val_u16(g, "t.u16", 65000);
  gguf_set_val_i16(g, "t.i16", -32000);
  gguf_set_val_u32(g, "t.u32", 4000000000u);
  gguf_set_val_i32(g, "t.i32", -2000000000);
  gguf_set_val_f32(g, "t.f32", -0.125f);
  gguf_set_val_u64(g, "t.u64", UINT64_MAX);
  gguf_set_val_i64(g, "t.i64", INT64_MIN);
  gguf_set_val_f64(g, "t.f64", 1e300);
  gguf_set_val_bool(g, "t.bool", true);
  gguf_set_val_str(g, "t.str", "h\xc3\xa9llo");
  const char* strs[] = {"<s>", "", "\xe2\x96\x81the"};
  gguf_set_arr_str(g, "t.strs", strs, 3);
  const int32_t i32s[] = {1, -2, 3};
  gguf_set_arr_data(g, "t.i32s", GGUF_TYPE_INT32, i32s, 3);
  const float f32s[] = {0.5f, -1.0f};
  gguf_set_arr_data(g, "t.f32s", GGUF_TYPE_FLOAT32, f32s, 2);

  ggml_init_params ip{/*mem_size=*/16 << 20, /*mem_buffer=*/nullptr, /*no_alloc=*/false};
  *tctx = ggml_init(ip);
  for (size_t k = 0; k < tensor_specs().size(); ++k) {
    const auto& s = tensor_specs()[k];
    int64_t ne[4] = {1, 1, 1, 1};
    for (size_t d = 0; d < s.ne.size(); ++d) ne[d] = s.ne[d];
    ggml_tensor* t = ggml_new_tensor(*tctx, static_cast<ggml_type>(s.type),
                                     static_cast<int>(s.ne.size()), ne);
    ggml_set_name(t, s.name);
    const auto data = pattern(spec_nbytes(s), static_cast<uint8_t>(k));
    EXPECT_EQ(ggml_nbytes(t), data.size());
    std::memcpy(t->data, data.data(), data.size());
    gguf_add_tensor(g, t);
  }
  return g;
}

TEST(GgufCompat, LlamaCppLoadsWhatWeWrite) {
  const std::string path = temp_path("ours");
  our_writer().write(path);
  ggml_context* tctx = nullptr;
  gguf_init_params params{/*no_alloc=*/false, /*ctx=*/&tctx};
  gguf_context* g = gguf_init_from_file(path.c_str(), params);
  ASSERT_NE(g, nullptr) << "llama.cpp refused " << path;
  auto ours = File::open(path);

  EXPECT_EQ(gguf_get_version(g), 3u);
  EXPECT_EQ(gguf_get_alignment(g), 32u);
  EXPECT_EQ(gguf_get_data_offset(g), ours->data_offset());
  ASSERT_EQ(gguf_get_n_kv(g), static_cast<int64_t>(ours->metadata().size()));
  for (int64_t k = 0; k < gguf_get_n_kv(g); ++k) {
    const auto& [key, v] = ours->metadata()[static_cast<size_t>(k)];
    EXPECT_EQ(gguf_get_key(g, k), key);
    ASSERT_EQ(static_cast<int>(gguf_get_kv_type(g, k)), static_cast<int>(v.type)) << key;
    switch (v.type) {
      case ValueType::UINT8: EXPECT_EQ(gguf_get_val_u8(g, k), v.u); break;
      case ValueType::INT8: EXPECT_EQ(gguf_get_val_i8(g, k), v.i); break;
      case ValueType::UINT16: EXPECT_EQ(gguf_get_val_u16(g, k), v.u); break;
      case ValueType::INT16: EXPECT_EQ(gguf_get_val_i16(g, k), v.i); break;
      case ValueType::UINT32: EXPECT_EQ(gguf_get_val_u32(g, k), v.u); break;
      case ValueType::INT32: EXPECT_EQ(gguf_get_val_i32(g, k), v.i); break;
      case ValueType::UINT64: EXPECT_EQ(gguf_get_val_u64(g, k), v.u); break;
      case ValueType::INT64: EXPECT_EQ(gguf_get_val_i64(g, k), v.i); break;
      case ValueType::FLOAT32: EXPECT_EQ(gguf_get_val_f32(g, k), static_cast<float>(v.f)); break;
      case ValueType::FLOAT64: EXPECT_EQ(gguf_get_val_f64(g, k), v.f); break;
      case ValueType::BOOL: EXPECT_EQ(gguf_get_val_bool(g, k), v.b); break;
      case ValueType::STRING: EXPECT_EQ(std::string(gguf_get_val_str(g, k)), v.str); break;
      case ValueType::ARRAY:
        ASSERT_EQ(static_cast<int>(gguf_get_arr_type(g, k)), static_cast<int>(v.elem_type)) << key;
        ASSERT_EQ(gguf_get_arr_n(g, k), v.arr.size()) << key;
        for (size_t e = 0; e < v.arr.size(); ++e) {
          if (v.elem_type == ValueType::STRING) {
            EXPECT_EQ(std::string(gguf_get_arr_str(g, k, e)), v.arr[e].str);
          } else if (v.elem_type == ValueType::INT32) {
            EXPECT_EQ(static_cast<const int32_t*>(gguf_get_arr_data(g, k))[e], v.arr[e].i);
          } else {
            ASSERT_EQ(v.elem_type, ValueType::FLOAT32);
            EXPECT_EQ(static_cast<const float*>(gguf_get_arr_data(g, k))[e],
                      static_cast<float>(v.arr[e].f));
          }
        }
        break;
    }
  }
  ASSERT_EQ(gguf_get_n_tensors(g), static_cast<int64_t>(tensor_specs().size()));
  for (int64_t k = 0; k < gguf_get_n_tensors(g); ++k) {
    const TensorInfo& t = ours->tensors()[static_cast<size_t>(k)];
    EXPECT_EQ(gguf_get_tensor_name(g, k), t.name);
    EXPECT_EQ(static_cast<int>(gguf_get_tensor_type(g, k)), static_cast<int>(t.type));
    EXPECT_EQ(gguf_get_tensor_offset(g, k), t.offset);
    EXPECT_EQ(gguf_get_tensor_size(g, k), t.nbytes);
    for (int d = 0; d < 4; ++d) EXPECT_EQ(gguf_get_tensor_ne(g, k)[d], t.ne[d]) << t.name;
    const ggml_tensor* gt = ggml_get_tensor(tctx, t.name.c_str());
    ASSERT_NE(gt, nullptr);
    EXPECT_EQ(std::memcmp(gt->data, t.data, t.nbytes), 0) << t.name;
  }
  gguf_free(g);
  ggml_free(tctx);
  std::remove(path.c_str());
}

TEST(GgufCompat, SameBytesAsGgmlWriter) {
  ggml_context* tctx = nullptr;
  gguf_context* g = ggml_writer(&tctx);
  const std::string path = temp_path("ggml");
  ASSERT_TRUE(gguf_write_to_file(g, path.c_str(), /*only_meta=*/false));
  gguf_free(g);
  ggml_free(tctx);
  const auto theirs = read_all(path);
  const auto ours = our_writer().to_bytes();
  ASSERT_EQ(theirs.size(), ours.size());
  size_t first_diff = 0;
  while (first_diff < ours.size() && ours[first_diff] == theirs[first_diff]) ++first_diff;
  EXPECT_EQ(first_diff, ours.size()) << "files differ from byte " << first_diff;

  // And our reader reads ggml's file.
  auto f = File::open(path);
  EXPECT_EQ(f->require_string("t.str"), "h\xc3\xa9llo");
  EXPECT_EQ(f->get_int("t.i64"), INT64_MIN);
  EXPECT_EQ(f->get_string_array("t.strs")->at(2), "\xe2\x96\x81the");
  EXPECT_EQ(f->tensors().size(), tensor_specs().size());
  std::remove(path.c_str());
}

// Every valid fuzz seed loads in llama.cpp's reader, and llama.cpp refuses every committed
// broken file, as ours does.
TEST(GgufCompat, SameVerdictOnCorpus) {
  const std::string dir = std::string(FT_SOURCE_DIR) + "/tests/data/bad/";
  for (const char* name :
       {"truncated_kv.gguf", "bad_magic.gguf", "version1.gguf", "big_endian.gguf",
        "bad_offset.gguf", "bad_alignment.gguf", "alignment_wrong_type.gguf", "duplicate_key.gguf",
        "duplicate_tensor.gguf", "unknown_value_type.gguf", "removed_ggml_type.gguf",
        "block_size.gguf", "huge_array.gguf", "huge_string.gguf", "dims_overflow.gguf"}) {
    gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
    gguf_context* g = gguf_init_from_file((dir + name).c_str(), params);
    EXPECT_EQ(g, nullptr) << "llama.cpp accepted " << name;
    if (g) gguf_free(g);
    EXPECT_THROW(File::open(dir + name), ft::Error) << name;
  }
  for (const char* name : {"valid_tiny.gguf", "valid_all_types.gguf", "valid_v2_no_tensors.gguf",
                           "valid_align64.gguf", "valid_empty.gguf"}) {
    const std::string path = std::string(FT_SOURCE_DIR) + "/fuzz/corpus/" + name;
    // llama.cpp refuses nested arrays (valid_all_types has one); we accept them.
    gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
    gguf_context* g = gguf_init_from_file(path.c_str(), params);
    if (std::string(name) != "valid_all_types.gguf") {
      EXPECT_NE(g, nullptr) << "llama.cpp refused " << name;
    } else {
      EXPECT_EQ(g, nullptr) << "llama.cpp now accepts nested arrays";
    }
    if (g) gguf_free(g);
    EXPECT_NO_THROW(File::open(path)) << name;
  }
}

// Differential fuzzing against llama.cpp: thousands of mutants of valid files (bit flips,
// interesting integers, truncations) must get the same verdict from both readers. Ours
// accepts a file iff llama.cpp's gguf reader does and every tensor's data lies inside the
// file (llama.cpp's model loader check). Known, intended differences: we accept nested
// arrays; we refuse overflowing shapes even when a dim is 0, and tensor names with a NUL
// byte (llama.cpp cuts them at the NUL).
TEST(GgufCompat, SameVerdictAsLlamaCppOnMutants) {
  ggml_log_set([](ggml_log_level, const char*, void*) {}, nullptr);  // llama.cpp is chatty
  std::vector<std::vector<uint8_t>> seeds;
  seeds.push_back(our_writer().to_bytes());
  for (const char* name : {"valid_tiny.gguf", "valid_align64.gguf", "valid_v2_no_tensors.gguf"})
    seeds.push_back(read_all(std::string(FT_SOURCE_DIR) + "/fuzz/corpus/" + name));
  const uint64_t interesting[] = {0, 1, 2, 3, 4, 8, 9, 12, 13, 31, 32, 33, 43, 63, 64, 255,
                                  0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, uint64_t{1} << 30,
                                  (uint64_t{1} << 30) + 1, uint64_t{1} << 32, INT64_MAX,
                                  UINT64_MAX};
  // FT_GGUF_MUTANTS=N runs N mutants per seed (default 10000, ~2 s under ASan).
  const char* env = std::getenv("FT_GGUF_MUTANTS");
  const int n_mutants = env ? std::atoi(env) : 10000;
  std::mt19937_64 rng(1234);
  int ours_ok = 0, ours_refused = 0, allowed = 0;
  for (const auto& seed : seeds) {
    auto meta_end = File::from_memory(seed.data(), seed.size(), "seed")->data_offset();
    for (int iter = 0; iter < n_mutants; ++iter) {
      auto b = seed;
      const int n_mut = 1 + static_cast<int>(rng() % 3);
      for (int m = 0; m < n_mut && !b.empty(); ++m) {
        // Mutate mostly the header/metadata/infos, where the checks are.
        const size_t span = rng() % 8 == 0 ? b.size() : std::min<size_t>(b.size(), meta_end);
        const size_t at = rng() % span;
        switch (rng() % 4) {
          case 0: b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
          case 1: b[at] = static_cast<uint8_t>(rng()); break;
          case 2: {
            const uint64_t v = interesting[rng() % std::size(interesting)];
            const size_t w = rng() % 2 ? 8 : 4;
            for (size_t k = 0; k < w && at + k < b.size(); ++k) b[at + k] = static_cast<uint8_t>(v >> (8 * k));
            break;
          }
          default: b.resize(at); break;
        }
      }
      std::string our_error;
      std::unique_ptr<File> ours;
      try {
        ours = File::from_memory(b.data(), b.size(), "mutant");
      } catch (const ft::Error& e) {
        our_error = e.what();
      }
      gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
      gguf_context* g = gguf_init_from_buffer(b.data(), b.size(), params);
      bool theirs_ok = g != nullptr;
      bool zero_dim = false;
      if (g) {
        for (int64_t k = 0; k < gguf_get_n_tensors(g); ++k) {
          // Exact size from ne, not gguf_get_tensor_size: ggml_nbytes computes ne[0]*nb[0]
          // before dividing by the block size, which wraps for huge quantized rows (a
          // llama.cpp quirk: such a file passes its bounds check; ours refuses it).
          const int64_t* ne = gguf_get_tensor_ne(g, k);
          const auto& tr = traits(static_cast<GgmlType>(gguf_get_tensor_type(g, k)));
          unsigned __int128 nbytes = static_cast<unsigned __int128>(ne[0] / tr.block_size) *
                                     static_cast<uint64_t>(tr.type_size);
          for (int d = 1; d < 4; ++d) {
            nbytes *= static_cast<uint64_t>(ne[d]);
            if (nbytes > (static_cast<unsigned __int128>(1) << 64)) nbytes = static_cast<unsigned __int128>(1) << 64;
          }
          const unsigned __int128 end = static_cast<unsigned __int128>(gguf_get_data_offset(g)) +
                                        gguf_get_tensor_offset(g, k) + nbytes;
          if (end > b.size()) theirs_ok = false;
          for (int d = 0; d < 4; ++d) zero_dim |= gguf_get_tensor_ne(g, k)[d] == 0;
        }
        gguf_free(g);
      }
      bool nested = false;
      if (ours)
        for (const auto& [key, v] : ours->metadata()) nested |= v.is_array() && v.elem_type == ValueType::ARRAY;
      const bool ok = ours != nullptr;
      ok ? ++ours_ok : ++ours_refused;
      if (ok && !theirs_ok && nested) {
        ++allowed;
        continue;
      }
      if (!ok && theirs_ok &&
          ((zero_dim && our_error.find("is too large") != std::string::npos) ||
           our_error.find("contains a NUL byte") != std::string::npos)) {
        ++allowed;
        continue;
      }
      ASSERT_EQ(ok, theirs_ok) << "ours: " << (ok ? "accepted" : our_error) << "; llama.cpp "
                               << (theirs_ok ? "accepted" : "refused") << " (seed of "
                               << seed.size() << " bytes, mutant " << iter << ")";
    }
  }
  ggml_log_set(nullptr, nullptr);
  // Both outcomes must be well represented, or the test checks nothing.
  EXPECT_GT(ours_ok, n_mutants / 4);
  EXPECT_GT(ours_refused, n_mutants);
  std::printf("mutants: %d accepted, %d refused, %d intended differences\n", ours_ok,
              ours_refused, allowed);
}

// A vocab-only llama model written by us loads in llama.cpp, which tokenizes with it.
TEST(GgufCompat, LlamaLoadsVocabOnlyModel) {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "ft-vocab-test");
  w.set_u32("llama.context_length", 128);
  w.set_u32("llama.embedding_length", 64);
  w.set_u32("llama.block_count", 1);
  w.set_u32("llama.feed_forward_length", 128);
  w.set_u32("llama.attention.head_count", 4);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "default");
  const std::vector<std::string> tokens = {"<s>", "</s>", "a", "b", "c", "ab", "abc", "\xc4\xa0"};
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", {3, 3, 1, 1, 1, 1, 1, 1});
  w.set_string_array("tokenizer.ggml.merges", {"a b", "ab c"});
  w.set_u32("tokenizer.ggml.bos_token_id", 0);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  const std::string path = temp_path("vocab");
  w.write(path);

  ggml_backend_load_all_from_path(FT_LLAMA_LIB_DIR);
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  ASSERT_NE(model, nullptr) << "llama.cpp could not load " << path;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  EXPECT_EQ(llama_vocab_n_tokens(vocab), static_cast<int32_t>(tokens.size()));
  llama_token out[16];
  const std::string text = "abcab";
  const int32_t n = llama_tokenize(vocab, text.c_str(), static_cast<int32_t>(text.size()), out, 16,
                                   /*add_special=*/false, /*parse_special=*/false);
  ASSERT_EQ(n, 2);
  EXPECT_EQ(out[0], 6);  // "abc"
  EXPECT_EQ(out[1], 5);  // "ab"
  llama_model_free(model);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ft::gguf
