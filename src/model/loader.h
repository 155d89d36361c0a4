// The tensor table of one architecture, read from the mapped GGUF file. An arch builder
// asks for each tensor by name with its expected ggml shape and whether it is required;
// the loader checks name, shape and type, hands back zero-copy views into the mapping,
// and remembers which tensors were claimed. finish() then refuses any tensor nobody
// claimed (llama.cpp's "wrong number of tensors"), so an unknown `.scale` or a role this
// arch does not run can never be silently ignored.
//
// Second-level NVFP4 scales (`<base>.scale`, `<base>.input_scale`) are validated for the
// whole file by check_scales() before any arch code runs; get_scaled()/get_experts()
// claim the ones next to the weights the arch uses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/tensor.h"

namespace ft::model {

class TensorLoader {
 public:
  explicit TensorLoader(const gguf::File& f);

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  const gguf::File& file() const { return f_; }

  // `shape` in ggml order; trailing dims of 1 may be omitted. An absent optional tensor
  // returns an empty Tensor.
  Tensor get(const std::string& name, const std::vector<int64_t>& shape, bool required = true);
  // Same, and the tensor must be F32 (norm weights, biases, rope factors, scales).
  Tensor get_f32(const std::string& name, const std::vector<int64_t>& shape, bool required = true);
  // A matmul weight without any scale companion (the MoE router).
  Tensor get_weight(const std::string& name, const std::vector<int64_t>& shape, bool required = true);
  // `<base>.weight` used as a matmul weight (type must have a kernel) plus its `.scale`
  // (value read now) and `.input_scale` (claimed, unused, as in llama.cpp).
  ScaledTensor get_scaled(const std::string& base, const std::vector<int64_t>& shape,
                          bool required = true);
  // `<base>.weight` of shape {k, rows, n_expert} plus its per-expert `.scale`.
  ExpertTensor get_experts(const std::string& base, const std::vector<int64_t>& shape,
                           bool required = true);
  // Marks a tensor the arch knows but does not run (e.g. a reranker head) as claimed.
  void ignore(const std::string& name);

  // Throws naming the first tensor in the file that was never claimed.
  void finish() const;

 private:
  const gguf::TensorInfo* claim(const std::string& name);
  void check_matmul_type(const gguf::TensorInfo& t) const;
  void claim_scale_siblings(const std::string& base, int64_t n_expected, float* scalar,
                            const float** vec);

  const gguf::File& f_;
  std::vector<bool> used_;  // parallel to f_.tensors()
};

// The model sources load_model(path) accepts: a GGUF file, or a Hugging Face checkpoint
// directory (config.json + safetensors), converted in memory by hf/convert.h into the
// same GGUF the `ft convert` command writes.
// `progress` (may be empty) reports the in-memory conversion of an HF directory.
std::unique_ptr<gguf::File> open_model_source(const std::string& path,
                                              const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace ft::model
