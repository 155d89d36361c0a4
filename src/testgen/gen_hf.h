// Tiny random Hugging Face checkpoints (config.json, model.safetensors or two shards + index,
// tokenizer.json, tokenizer_config.json with a Qwen chat template) for llama, qwen3 and
// qwen3moe, in BF16, ModelOpt NVFP4 or compressed-tensors NVFP4.
//
// A fixture is made from a test-model-generator GGUF (`source_gguf`, written too: BF16
// weights, F32 norms, the byte-level BPE test vocabulary), renamed to HF names with llama's
// q/k rows permuted back to HF order, norms stored as BF16 (as real checkpoints do). NVFP4
// fixtures quantise those BF16 values with the ModelOpt recipe (quant::quantize_row_ref,
// second-level scale amax/(6*448) per tensor / per expert), so `ft convert --outtype nvfp4`
// of the BF16 fixture of the same seed gives the same NVFP4 bytes.
#pragma once

#include <cstdint>
#include <string>

#include "testgen/model_gen.h"

namespace ft::testgen {

enum class HfFormat { kBF16, kModelOpt, kCompressed };

struct HfFixture {
  ModelSpec model;                  // arch, sizes, seed (bpe_vocab is forced on, types BF16)
  HfFormat format = HfFormat::kBF16;
  bool sharded = false;             // two shards + model.safetensors.index.json
  bool merges_as_pairs = false;     // tokenizer.json merges as ["a", "b"] (transformers >= 4.45)
  // NVFP4: layer 0's v_proj gets second-level scale 1 written nowhere (the converter omits
  // its .scale); every other tensor gets input scales 0.05 (kept as .input_scale, unused).
  bool unit_scale_v0 = true;
  // llama: rope_scaling {rope_type llama3, factor 8, low 1, high 4, original context 64}, so
  // the converter writes rope_freqs.weight with pairs in all three bands (head_dim 32).
  bool llama3_rope = false;
};

struct HfFixtureResult {
  int64_t n_vocab = 0;
  int64_t n_hf_tensors = 0;
};

// A ready-made fixture: preset "tiny" of `arch`, seed, the given format.
HfFixture hf_fixture(Arch arch, HfFormat format, uint64_t seed = 7);

// Writes `source_gguf` and the checkpoint directory `dir` (created; existing files replaced).
HfFixtureResult generate_hf(const HfFixture& f, const std::string& dir, const std::string& source_gguf);

}  // namespace ft::testgen
