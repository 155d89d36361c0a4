#include "model/loader.h"

#include <filesystem>

#include "core/error.h"
#include "hf/convert.h"
#include "quant/matmul.h"

namespace ft::model {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

Tensor view_of(const gguf::TensorInfo& t) {
  Tensor v;
  v.data = t.data;
  v.type = t.type;
  v.n_dims = t.n_dims;
  for (int i = 0; i < 4; ++i) v.ne[i] = t.ne[i];
  v.name = t.name.c_str();
  return v;
}

}  // namespace

TensorLoader::TensorLoader(const gguf::File& f) : f_(f), used_(f.tensors().size(), false) {}

const gguf::TensorInfo* TensorLoader::claim(const std::string& name) {
  const gguf::TensorInfo* t = f_.find_tensor(name);
  if (!t) return nullptr;
  used_[static_cast<size_t>(t - f_.tensors().data())] = true;
  return t;
}

void TensorLoader::ignore(const std::string& name) { claim(name); }

Tensor TensorLoader::get(const std::string& name, const std::vector<int64_t>& shape,
                         bool required) {
  const gguf::TensorInfo* t = claim(name);
  if (!t) {
    if (required) fail("{}: missing tensor '{}' (expected shape {})", f_.path(), name, shape_str(shape));
    return {};
  }
  bool ok = shape.size() <= 4;
  for (size_t i = 0; ok && i < 4; ++i) ok = t->ne[i] == (i < shape.size() ? shape[i] : 1);
  if (!ok)
    fail("{}: tensor '{}' has shape {}, expected {}", f_.path(), name, t->shape_string(),
         shape_str(shape));
  return view_of(*t);
}

Tensor TensorLoader::get_f32(const std::string& name, const std::vector<int64_t>& shape,
                             bool required) {
  Tensor t = get(name, shape, required);
  if (t && t.type != GgmlType::F32)
    fail("{}: tensor '{}' has type {}, expected f32", f_.path(), name, type_name(t.type));
  return t;
}

void TensorLoader::check_matmul_type(const gguf::TensorInfo& t) const {
  if (!quant::matmul_supported(t.type))
    fail("{}: tensor '{}' has type {}, which has no CPU matmul kernel", f_.path(), t.name,
         type_name(t.type));
}

void TensorLoader::claim_scale_siblings(const std::string& base, int64_t n_expected, float* scalar,
                                        const float** vec) {
  // check_scales() has already refused wrong types, shapes and non-NVFP4 neighbours; the
  // element count is re-checked here because the arch's shape is the one that matters.
  if (const gguf::TensorInfo* s = claim(base + ".scale")) {
    if (s->type != GgmlType::F32 || s->n_elements() != n_expected)
      fail("{}: tensor '{}' must be f32 with {} element(s), got {} {}", f_.path(), s->name,
           n_expected, type_name(s->type), s->shape_string());
    const float* p = reinterpret_cast<const float*>(s->data);
    if (scalar) *scalar = p[0];
    if (vec) *vec = p;
  }
  claim(base + ".input_scale");  // loaded but never used, as in llama.cpp
}

Tensor TensorLoader::get_weight(const std::string& name, const std::vector<int64_t>& shape,
                                bool required) {
  Tensor t = get(name, shape, required);
  if (t) check_matmul_type(*f_.find_tensor(name));
  return t;
}

ScaledTensor TensorLoader::get_scaled(const std::string& base, const std::vector<int64_t>& shape,
                                      bool required) {
  ScaledTensor r;
  r.w = get(base + ".weight", shape, required);
  if (!r.w) return r;
  check_matmul_type(*f_.find_tensor(base + ".weight"));
  float s = 1.0f;
  const float* unused = nullptr;
  r.has_scale = f_.find_tensor(base + ".scale") != nullptr;
  claim_scale_siblings(base, 1, &s, &unused);
  r.scale = s;
  return r;
}

ExpertTensor TensorLoader::get_experts(const std::string& base, const std::vector<int64_t>& shape,
                                       bool required) {
  ExpertTensor r;
  r.w = get(base + ".weight", shape, required);
  if (!r.w) return r;
  check_matmul_type(*f_.find_tensor(base + ".weight"));
  claim_scale_siblings(base, r.w.ne[2], nullptr, &r.scale);
  return r;
}

void TensorLoader::finish() const {
  const auto& ts = f_.tensors();
  size_t n_unused = 0;
  for (bool u : used_) n_unused += !u;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (used_[i]) continue;
    fail("{}: tensor '{}' is not used by architecture '{}' ({} unknown tensor(s) in the file; "
         "llama.cpp refuses such files too)",
         f_.path(), ts[i].name, f_.get_string("general.architecture").value_or("?"), n_unused);
  }
}

std::unique_ptr<gguf::File> open_model_source(const std::string& path,
                                              const std::function<void(uint64_t, uint64_t)>& progress) {
  if (hf::is_hf_dir(path)) return hf::open_hf_as_gguf(path, progress);
  if (std::filesystem::is_directory(path))
    fail("{}: a directory without config.json; expected a GGUF file or a Hugging Face checkpoint directory", path);
  return gguf::File::open(path);
}

}  // namespace ft::model
