// Robustness of the Hugging Face readers against the JSON files a user's checkpoint carries: config.json,
// tokenizer.json, tokenizer_config.json and hf_quant_config.json of a valid fixture, each mutated (tests/json_mutate.h:
// a node replaced by an edge value of another type, removed, wrapped, repeated), must plan a conversion and load, or
// fail with ft::Error naming the file -- never json's own exceptions (a message without the file or key), another
// exception or a crash. Deterministic; FT_HF_MUTANTS=N mutants a file (default 40) for a long run.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../json_mutate.h"
#include "../mutants.h"
#include "core/error.h"
#include "hf/convert.h"
#include "hf/hf_config.h"
#include "hf_util.h"
#include "model/model.h"
#include "testgen/gen_hf.h"

namespace {

namespace fs = std::filesystem;
using ft::testgen::Arch;
using ft::testgen::HfFormat;
using ojson = nlohmann::ordered_json;

// Values the readers look for, beside json_mutate's edges of each type.
const std::vector<ojson>& hf_values() {
  static const std::vector<ojson> v = {"BPE", "Split", "Sequence", "NVFP4", "modelopt", "compressed-tensors",
                                       "nvfp4-pack-quantized", "llama3", "LlamaForCausalLM", "Qwen3ForCausalLM",
                                       "Qwen3MoeForCausalLM", "<|im_end|>", ojson::array({"a", "b"}),
                                       ojson::object({{"Regex", "\\s+"}})};
  return v;
}

// Runs f; "" when it succeeds (ok counts it) or throws ft::Error, else what escaped.
std::string escaped(const std::function<void()>& f, int* ok) {
  try {
    f();
    ++*ok;
  } catch (const ft::Error& e) {
    if (std::string(e.what()).empty()) return "an ft::Error without a message";
  } catch (const std::exception& e) {
    return std::string("a std::exception: ") + e.what();
  } catch (...) {
    return "an unknown exception";
  }
  return "";
}

// Mutates each JSON file in turn; counts the runs (plan, load) and those that succeeded.
void mutate_files(const std::string& dir, uint32_t seed, int& runs, int& ok) {
  const int n = ft::test::mutant_count("FT_HF_MUTANTS", 40);
  std::mt19937 rng(seed);
  for (const char* name : {"config.json", "tokenizer.json", "tokenizer_config.json", "hf_quant_config.json"}) {
    const std::string path = dir + "/" + name;
    if (!fs::exists(path)) continue;
    const ojson orig = ojson::parse(ft::hf::read_json(path).dump());
    int failures = 0;
    for (int i = 0; i < n && failures < 5; ++i) {
      ojson doc = orig;
      const int k = std::uniform_int_distribution<int>(1, 3)(rng);
      for (int m = 0; m < k; ++m) ft::test::json_mutate(doc, rng, hf_values());
      const std::string text = doc.dump(-1, ' ', false, ojson::error_handler_t::replace);
      ft::test::write_file(path, text);
      for (const auto& [what, f] : std::vector<std::pair<const char*, std::function<void()>>>{
               {"plan", [&] { ft::hf::Conversion::plan(dir); }}, {"load", [&] { ft::model::load_model(dir); }}}) {
        ++runs;
        const std::string e = escaped(f, &ok);
        if (!e.empty()) {
          ++failures;
          ADD_FAILURE() << what << " of " << name << " " << text.substr(0, 700) << "\n-> " << e;
        }
      }
    }
    ft::test::write_file(path, orig.dump());
  }
}

TEST(HfFuzz, MutatedJsonFilesFailWithFtError) {
  struct Case {
    Arch arch;
    HfFormat format;
    bool llama3_rope;
  };
  uint32_t seed = 11;
  int runs = 0, ok = 0;
  for (const Case c : {Case{Arch::kQwen3Moe, HfFormat::kModelOpt, false}, Case{Arch::kQwen3, HfFormat::kCompressed, false},
                       Case{Arch::kLlama, HfFormat::kBF16, true}}) {
    auto fx = ft::testgen::hf_fixture(c.arch, c.format, 3);
    fx.llama3_rope = c.llama3_rope;
    const std::string dir = ft::test::hf_tmp("fuzz" + std::to_string(seed));
    ft::testgen::generate_hf(fx, dir, ft::test::hf_tmp("fuzz" + std::to_string(seed) + ".src.gguf"));
    // The fixture itself plans and loads.
    EXPECT_NO_THROW(ft::hf::Conversion::plan(dir));
    EXPECT_NO_THROW(ft::model::load_model(dir));
    mutate_files(dir, seed++, runs, ok);
  }
  // Both outcomes occur: mutants pass the readers' checks into the plan and the load, not only their refusals.
  std::printf("%d runs: %d planned or loaded, %d refused\n", runs, ok, runs - ok);
  EXPECT_GT(ok, 0);
  EXPECT_GT(runs - ok, 0);
}

}  // namespace
