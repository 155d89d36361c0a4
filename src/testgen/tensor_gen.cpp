#include "testgen/tensor_gen.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "testgen/rng.h"

namespace ft::testgen {

void TensorGen::f32(const std::string& name, std::vector<int64_t> ne, const std::vector<float>& v) {
  GenTensor t;
  t.name = name;
  t.ne = std::move(ne);
  t.cols = t.ne[0];
  t.rows = static_cast<int64_t>(v.size()) / t.cols;
  t.data.resize(v.size() * 4);
  std::memcpy(t.data.data(), v.data(), t.data.size());
  all_.push_back(std::move(t));
}

GenTensor& TensorGen::weight(const std::string& name, int64_t cols, int64_t rows, int64_t n_mat, Role role, float sd,
                             const std::vector<float>& factors, bool scaled,
                             const std::function<void(std::vector<float>&)>& tweak) {
  GenTensor t;
  t.name = name;
  t.cols = cols;
  t.rows = rows;
  t.n_mat = n_mat;
  t.expert = role == Role::kExperts;
  t.weight = true;
  t.ne = n_mat > 1 || t.expert ? std::vector<int64_t>{cols, rows, n_mat} : std::vector<int64_t>{cols, rows};
  t.type = spec_.type(role);
  const auto& tr = traits(t.type);
  if (cols % tr.block_size != 0)
    fail("testgen: tensor {} has rows of {} elements, not a multiple of the {} block size {}; choose other dims or "
         "another type for role '{}'",
         name, cols, tr.name, tr.block_size, role_name(role));
  Rng rng(Rng::mix(spec_.seed, hash_name(name.c_str())));
  std::vector<float> w(static_cast<size_t>(cols * rows));
  const int64_t rb = row_bytes(t.type, cols);
  t.data.resize(static_cast<size_t>(rb * rows * n_mat));
  const bool with_scale = t.type == GgmlType::NVFP4 && scaled && spec_.nvfp4_scales;
  for (int64_t m = 0; m < n_mat; ++m) {
    const float f = factors.empty() ? 1.0f : factors[static_cast<size_t>(m)];
    for (auto& x : w) x = rng.normal() * sd * f;
    if (tweak) tweak(w);
    const float s2 = with_scale ? quant::nvfp4_tensor_scale(w.data(), static_cast<int64_t>(w.size())) : 1.0f;
    if (with_scale) t.s2.push_back(s2);
    for (int64_t r = 0; r < rows; ++r)
      quant::quantize_row_ref(t.type, w.data() + r * cols, t.data.data() + (m * rows + r) * rb, cols, s2);
  }
  if (omit_unit_scales_ && !t.s2.empty() && std::all_of(t.s2.begin(), t.s2.end(), [](float s) { return s == 1.0f; }))
    t.s2.clear();
  if (progress_)
    std::fprintf(stderr, "  %-32s %-6s [%lld, %lld, %lld]\n", name.c_str(), std::string(tr.name).c_str(),
                 static_cast<long long>(cols), static_cast<long long>(rows), static_cast<long long>(n_mat));
  all_.push_back(std::move(t));
  return all_.back();
}

std::vector<float> uniform_vec(uint64_t seed, const std::string& label, int64_t n, float lo, float hi, float mul) {
  Rng rng(Rng::mix(seed, hash_name(label.c_str())));
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.uniform(lo, hi) * mul;
  return v;
}

namespace {

enum class Variant { kModel, kTwin, kNoScale };

// What the file's .scale of t holds for matrix m.
float scale_of(const GenTensor& t, Variant v, int64_t m) {
  const float s2 = t.s2.empty() || v == Variant::kNoScale ? 1.0f : t.s2[static_cast<size_t>(m)];
  return s2 * (t.pes.empty() ? 1.0f : t.pes[static_cast<size_t>(m)]);
}

// Returns the tensors written and, of them, the NVFP4 second-level scales.
std::pair<int64_t, int64_t> write_variant(const gguf::Writer& keys, const std::vector<GenTensor>& ts,
                                          const std::string& out, Variant v, GenerateResult* res) {
  gguf::Writer fw = keys;
  if (v == Variant::kTwin) fw.set_u32("general.file_type", 0);
  int64_t n_t = 0, n_s = 0;
  bool first = true;
  for (const GenTensor& t : ts) {
    const GenTensor* tp = &t;
    if (v != Variant::kTwin || !t.weight) {
      fw.add_tensor_stream(t.name, t.type, t.ne, [tp](uint8_t* dst, uint64_t n) { std::memcpy(dst, tp->data.data(), n); });
    } else {
      fw.add_tensor_stream(t.name, GgmlType::F32, t.ne, [tp, v](uint8_t* dst, uint64_t) {
        const int64_t rb = row_bytes(tp->type, tp->cols);
        float* o = reinterpret_cast<float*>(dst);
        for (int64_t m = 0; m < tp->n_mat; ++m) {
          const float s = scale_of(*tp, v, m);
          for (int64_t r = 0; r < tp->rows; ++r) {
            float* row = o + (m * tp->rows + r) * tp->cols;
            quant::dequantize_row_ref(tp->type, tp->data.data() + (m * tp->rows + r) * rb, row, tp->cols);
            if (s != 1.0f)
              for (int64_t k = 0; k < tp->cols; ++k) row[k] *= s;
          }
        }
      });
    }
    ++n_t;
    const bool has_scale = !t.pes.empty() || (!t.s2.empty() && v == Variant::kModel);
    if (v == Variant::kTwin || !has_scale) continue;
    const int64_t n = t.expert ? t.n_mat : 1;
    std::vector<float> sv;
    for (int64_t m = 0; m < n; ++m) sv.push_back(scale_of(t, v, m));
    if (res)
      for (float s : sv) {
        res->min_scale = first ? s : std::min(res->min_scale, s);
        res->max_scale = first ? s : std::max(res->max_scale, s);
        first = false;
      }
    std::vector<uint8_t> bytes(sv.size() * 4);
    std::memcpy(bytes.data(), sv.data(), bytes.size());
    fw.add_tensor(t.name.substr(0, t.name.size() - 7) + ".scale", GgmlType::F32, {n}, std::move(bytes));
    ++n_t;
    n_s += !t.s2.empty();  // NVFP4 second-level scales (per_expert_scale alone is not one)
  }
  fw.write(out);
  return {n_t, n_s};
}

}  // namespace

void write_model_files(const gguf::Writer& keys, const std::vector<GenTensor>& ts, const std::string& path,
                       const std::string& twin_path, const std::string& noscale_path, GenerateResult& res) {
  const auto [n_t, n_s] = write_variant(keys, ts, path, Variant::kModel, &res);
  res.n_tensors = n_t;
  res.n_scale_tensors = n_s;
  res.file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  if (!twin_path.empty()) write_variant(keys, ts, twin_path, Variant::kTwin, nullptr);
  if (!noscale_path.empty()) write_variant(keys, ts, noscale_path, Variant::kNoScale, nullptr);
}

}  // namespace ft::testgen
