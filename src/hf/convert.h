// Hugging Face checkpoint -> GGUF, as llama.cpp's convert_hf_to_gguf.py writes it for
// llama / qwen3 / qwen3moe: tensor names, metadata (incl. tokenizer.ggml.* and the chat
// template), F32 norms and router, ModelOpt / compressed-tensors NVFP4 weights repacked
// losslessly into block_nvfp4 with their `.scale` / `.input_scale` tensors (omitted where
// exactly 1; per-expert vectors for the stacked ffn_*_exps), and optionally
// (OutType::kNvfp4) float projection and expert weights quantised the ModelOpt way
// (second-level scale amax/(6*448) per tensor or per expert, E4M3 block scales per 16,
// round-to-nearest-even E2M1: quant::quantize_row_ref).
//
// The same plan serves `ft convert` (written to a file tensor by tensor) and loading an HF
// directory directly (a GGUF image in anonymous memory that the GGUF reader parses), so
// model code never knows where a model came from. In memory, a tensor whose checkpoint bytes
// already are its GGUF bytes (a BF16/F16/F32 weight kept in its type, not permuted, not
// stacked) is not copied: its TensorInfo::data points into the checkpoint's mapping, so such
// a checkpoint costs little more than its page cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "format/ggml_type.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "hf/hf_config.h"
#include "hf/hf_tokenizer.h"
#include "hf/safetensors.h"

namespace ft::hf {

// kAuto keeps each float weight's checkpoint type (BF16 -> BF16, F16 -> F16, F32 -> F32).
enum class OutType { kAuto, kF32, kF16, kBF16, kNvfp4 };
OutType parse_outtype(const std::string& s);  // auto|f32|f16|bf16|nvfp4, throws

// True when `path` looks like an HF checkpoint directory (a directory with config.json).
bool is_hf_dir(const std::string& path);

class Conversion {
 public:
  // Reads config, tokenizer and tensor headers and plans every output tensor (the NVFP4
  // scales and, for kNvfp4, the weights' amax are computed now). Throws ft::Error.
  static std::unique_ptr<Conversion> plan(const std::string& dir, OutType out = OutType::kAuto);
  ~Conversion();

  const HfConfig& config() const { return cfg_; }
  const gguf::Writer& writer() const { return w_; }
  int64_t n_tensors() const { return n_tensors_; }
  uint64_t data_bytes() const { return data_bytes_; }
  // Called after each tensor with (bytes done, bytes total).
  void set_progress(std::function<void(uint64_t, uint64_t)> p) { progress_ = std::move(p); }

  // Streams the GGUF to `path` (PATH.tmp, then renamed).
  void write(const std::string& path);
  // The GGUF in anonymous memory, opened by the GGUF reader; tensors whose bytes the
  // checkpoint already holds are referenced there, not copied (the File keeps it mapped).
  std::unique_ptr<gguf::File> open_in_memory();
  // Tensors (and their bytes) that open_in_memory() references in the checkpoint.
  int64_t n_referenced() const;
  uint64_t referenced_bytes() const;

 private:
  Conversion() = default;
  struct Source;
  void build();
  // `same_bytes`: where the tensor's GGUF bytes are exactly these checkpoint bytes.
  void add(const std::string& name, GgmlType type, std::vector<int64_t> ne,
           std::function<void(uint8_t*)> fill, const uint8_t* same_bytes = nullptr);
  void add_f32_values(const std::string& name, std::vector<float> v);
  void add_float(const std::string& name, const std::vector<const StTensor*>& src, GgmlType type, int perm_heads);
  void add_linear(const std::string& gguf_base, const std::vector<std::string>& hf_bases, bool quantisable,
                  int perm_heads);
  void add_bias(const std::string& gguf_name, const std::string& hf_name, int perm_heads);
  GgmlType float_type(const StTensor& t) const;
  const StTensor& take(const std::string& name);
  const StTensor* take_opt(const std::string& name);

  std::string dir_;
  OutType out_ = OutType::kAuto;
  std::shared_ptr<Checkpoint> ckpt_;  // shared with the in-memory File it backs
  HfConfig cfg_;
  HfVocab vocab_;
  gguf::Writer w_;
  std::vector<std::string> used_;
  std::vector<std::pair<uint64_t, std::function<void(uint8_t*, uint64_t)>>> fills_;  // add order
  std::vector<std::string> names_;                                                    // add order
  std::vector<const uint8_t*> same_bytes_;  // add order; non-null: referenced in memory
  int64_t n_tensors_ = 0;
  uint64_t data_bytes_ = 0, done_bytes_ = 0;
  bool any_nvfp4_ = false;
  GgmlType main_float_ = GgmlType::F32;
  std::function<void(uint64_t, uint64_t)> progress_;
};

// Llama 3's rope_freqs.weight (per rotary pair: 1, factor, or the smooth blend between),
// computed in float32 as convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors does.
std::vector<float> llama3_rope_factors(const HfConfig& c);

// load_model()'s second source: an HF checkpoint directory as an in-memory GGUF.
// `progress` (may be empty) gets (bytes done, bytes total) while tensors are converted.
std::unique_ptr<gguf::File> open_hf_as_gguf(const std::string& dir,
                                            const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace ft::hf
