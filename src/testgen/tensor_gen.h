// The tensors of a generated test model and the three files written from them, shared by
// generate_model (model_gen.cpp: llama, qwen3, qwen3moe, qwen35, qwen35moe) and
// generate_gemma4 (gen_gemma4.cpp):
//  * the model: each weight in its storage type, followed by its `.scale` tensor when it has
//    NVFP4 second-level scales or gemma4's per_expert_scale (their product per matrix);
//  * the F32 twin: every weight dequantised with its scales folded into its rows, no .scale;
//  * the no-scale copy: the weights as stored without the NVFP4 second-level scales (a
//    per_expert_scale stays, alone).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/gguf_writer.h"
#include "testgen/model_gen.h"

namespace ft::testgen {

// One tensor as generated: an F32 vector (norms, tables) or a stack of n_mat [rows][cols]
// Gaussian matrices in its storage type.
struct GenTensor {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType type = GgmlType::F32;
  int64_t cols = 0, rows = 0, n_mat = 1;
  std::vector<uint8_t> data;
  std::vector<float> s2;   // NVFP4 second-level scale per matrix (empty: none)
  std::vector<float> pes;  // gemma4's router per_expert_scale (ffn_down_exps; empty: none)
  bool expert = false;     // expert stack: its .scale holds one value per matrix
  bool weight = false;     // a generated matrix (false: an F32 vector, copied as is everywhere)
};

class TensorGen {
 public:
  // omit_unit_scales: drop a weight's second-level scales when all are exactly 1, as llama.cpp's
  // converter does (model_gen.cpp; gemma4 keeps them).
  TensorGen(const ModelSpec& spec, bool progress, bool omit_unit_scales)
      : spec_(spec), progress_(progress), omit_unit_scales_(omit_unit_scales) {}

  void f32(const std::string& name, std::vector<int64_t> ne, const std::vector<float>& v);
  // n_mat Gaussian [rows][cols] matrices with std sd * factors[m] (tweak may edit each before
  // it is stored) in role's type; NVFP4 gets a second-level scale when `scaled` and the spec
  // has nvfp4_scales. Shape {cols, rows} or, for experts or n_mat > 1, {cols, rows, n_mat}.
  GenTensor& weight(const std::string& name, int64_t cols, int64_t rows, int64_t n_mat, Role role, float sd,
                    const std::vector<float>& factors, bool scaled,
                    const std::function<void(std::vector<float>&)>& tweak = {});

  const std::vector<GenTensor>& tensors() const { return all_; }

 private:
  const ModelSpec& spec_;
  bool progress_;
  bool omit_unit_scales_;
  std::vector<GenTensor> all_;
};

// n values uniform in [lo, hi) times mul, seeded by (seed, label).
std::vector<float> uniform_vec(uint64_t seed, const std::string& label, int64_t n, float lo, float hi,
                               float mul = 1.0f);

// Writes the model to path with the metadata of `keys`, and the twin / no-scale copy when
// their paths are non-empty; sets res's tensor counts, file size and scale range.
void write_model_files(const gguf::Writer& keys, const std::vector<GenTensor>& ts, const std::string& path,
                       const std::string& twin_path, const std::string& noscale_path, GenerateResult& res);

}  // namespace ft::testgen
