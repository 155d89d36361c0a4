#include "gpu/weights.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <deque>
#include <unordered_map>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/nvfp4_scan.h"
#include "cuda/nvfp4_tiled.h"
#include "core/log.h"
#include "engine/linear.h"
#include "quant/dequant.h"
#include "model/model.h"

namespace ft::gpu {
namespace {

constexpr size_t kAlign = 256;

// A layer's dense projections: the ones the NVFP4 scan and the tiling visit.
std::array<DevLinear*, 8> dense_projections(DevLayer& D) {
  return {&D.qkv, &D.wo, &D.gate_up, &D.down, &D.gdn_in, &D.gdn_out, &D.gate_up_shexp, &D.down_shexp};
}

// Plans the arena: every upload is a run of host pieces placed at an aligned offset. Views
// are first built with offsets in their pointer fields and relocated once the arena exists.
class Planner {
 public:
  struct Piece {
    const void* src;
    size_t bytes;
  };

  // Places the pieces one after another; a single piece already placed (the tied output
  // head is token_embd) is shared.
  size_t place(std::vector<Piece> pieces) {
    if (pieces.size() == 1) {
      auto it = seen_.find(pieces[0].src);
      if (it != seen_.end()) return it->second;
    }
    size_t bytes = 0;
    for (const Piece& p : pieces) bytes += p.bytes;
    const size_t off = total_;
    if (pieces.size() == 1) seen_[pieces[0].src] = off;
    items_.push_back({std::move(pieces), off});
    total_ = (total_ + bytes + kAlign - 1) / kAlign * kAlign;
    return off;
  }
  size_t place_floats(std::vector<float> v) {
    const size_t bytes = v.size() * sizeof(float);
    return place({{own(std::move(v)), bytes}});
  }
  // Keeps host data alive until the upload (stable address).
  const float* own(std::vector<float> v) {
    owned_.push_back(std::move(v));
    return owned_.back().data();
  }
  size_t total() const { return total_; }

  // `file`: the model's mapping, whose pages each chunk gives back once copied (a no-op for
  // bytes outside it), so the process does not keep the weights twice (issue 4: host RAM
  // within 5% of what the model needs).
  void upload(uint8_t* base, const DeviceWeights::Progress& progress, const gguf::File& file) const {
    // Chunks of 64 MiB so the progress line moves and the driver's pageable staging
    // overlaps with our reads of the mapping.
    constexpr size_t kChunk = size_t{64} << 20;
    uint64_t done = 0;
    for (const Item& it : items_) {
      size_t off = it.offset;
      for (const Piece& p : it.pieces) {
        for (size_t b = 0; b < p.bytes; b += kChunk) {
          const size_t n = std::min(kChunk, p.bytes - b);
          FT_CUDA_CHECK(cudaMemcpy(base + off + b, static_cast<const uint8_t*>(p.src) + b, n,
                                   cudaMemcpyHostToDevice));
          file.drop_pages(static_cast<const uint8_t*>(p.src) + b, n);
          done += n;
          if (progress) progress(done, total_);
        }
        off += p.bytes;
      }
    }
    if (progress) progress(total_, total_);
  }

 private:
  struct Item {
    std::vector<Piece> pieces;
    size_t offset;
  };
  std::vector<Item> items_;
  std::deque<std::vector<float>> owned_;
  std::unordered_map<const void*, size_t> seen_;
  size_t total_ = 0;
};

// Offsets are stored +1 so that "absent" (nullptr) stays distinguishable before relocation.
template <class T>
T* tag(size_t off) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(off + 1));
}
template <class T>
void fix(T*& p, uint8_t* base) {
  if (p == nullptr) return;
  p = reinterpret_cast<T*>(base + (reinterpret_cast<uintptr_t>(p) - 1));
}

// A weight as it goes to the device: the file's bytes, or -- for a type without GPU kernels
// (Q4_0, Q5_K, IQ3_XXS, ...) -- its rows dequantised to F32 on the host (exact, 4 bytes per
// weight: a correctness fallback, logged once per type).
struct Src {
  GgmlType type;
  const uint8_t* data;
  int64_t row_bytes;
};

Src source(Planner& pl, const model::Tensor& t, int64_t n_rows) {
  if (cuda::gemv_supported(t.type)) return {t.type, t.data, t.row_bytes()};
  if (!quant::has_ref_dequant(t.type))
    fail("tensor '{}' has type {}, which the CUDA backend cannot run or dequantise", t.name, type_name(t.type));
  static bool warned[64] = {};
  const auto ti = static_cast<size_t>(t.type) % 64;
  if (!warned[ti]) {
    warned[ti] = true;
    log::warn("cuda: {} tensors (e.g. '{}') have no GPU kernels; they run dequantised to F32 (8x their size)",
              type_name(t.type), t.name);
  }
  const int64_t k = t.ne[0];
  std::vector<float> f(static_cast<size_t>(n_rows * k));
  for (int64_t r = 0; r < n_rows; ++r) quant::dequantize_row_ref(t.type, t.data + r * t.row_bytes(), f.data() + r * k, k);
  return {GgmlType::F32, reinterpret_cast<const uint8_t*>(pl.own(std::move(f))), k * 4};
}

const float* place_f32(Planner& pl, const model::Tensor& t) {
  if (!t) return nullptr;
  if (t.type != GgmlType::F32) fail("tensor '{}' must be F32 for the CUDA backend", t.name);
  return tag<const float>(pl.place({{t.data, static_cast<size_t>(t.ne[0] * t.ne[1] * 4)}}));
}

// n fp32 values the model holds as a raw view (qwen35's Gated DeltaNet vectors).
const float* place_raw_f32(Planner& pl, const float* v, int64_t n) {
  if (v == nullptr) return nullptr;
  return tag<const float>(pl.place({{v, static_cast<size_t>(n) * sizeof(float)}}));
}

DevLinear place_linear(Planner& pl, const engine::Linear& l) {
  DevLinear d;
  if (l.empty()) return d;
  d.rows = l.rows();
  d.k = l.k();
  std::vector<Src> src;
  for (const auto& p : l.parts()) {
    if (p.bias) fail("tensor '{}' has a bias, which the CUDA backend does not apply yet", p.w.name);
    src.push_back(source(pl, p.w, p.rows()));
  }
  bool same = true;
  for (const Src& x : src) same &= x.type == src[0].type;
  if (same && l.parts().size() > 1) {
    std::vector<Planner::Piece> pieces;
    for (size_t i = 0; i < src.size(); ++i)
      pieces.push_back({src[i].data, static_cast<size_t>(src[i].row_bytes * l.parts()[i].rows())});
    d.parts.push_back({src[0].type, tag<const uint8_t>(pl.place(std::move(pieces))), src[0].row_bytes,
                       l.k(), l.rows(), 0, 1.0f});
    const std::vector<float> rs = l.row_scales();
    if (std::any_of(rs.begin(), rs.end(), [](float s) { return s != 1.0f; }))
      d.row_scale = tag<const float>(pl.place_floats(rs));
  } else {
    for (size_t i = 0; i < src.size(); ++i) {
      const auto& p = l.parts()[i];
      d.parts.push_back({src[i].type,
                         tag<const uint8_t>(pl.place({{src[i].data, static_cast<size_t>(src[i].row_bytes * p.rows())}})),
                         src[i].row_bytes, l.k(), p.rows(), p.row0, p.scale});
    }
  }
  return d;
}

DevExpertTensor place_experts(Planner& pl, const model::ExpertTensor& t, bool upload) {
  DevExpertTensor d;
  if (!t) return d;
  if (!upload) {  // described only: the layout host_bank.cpp gives it (F32 rows without GPU kernels)
    const bool native = cuda::gemv_supported(t.w.type);
    if (!native && !quant::has_ref_dequant(t.w.type))
      fail("tensor '{}' has type {}, which the CUDA backend cannot run or dequantise", t.w.name, type_name(t.w.type));
    d.type = native ? t.w.type : GgmlType::F32;
    d.row_bytes = native ? t.w.row_bytes() : t.w.ne[0] * 4;
    d.expert_bytes = d.row_bytes * t.w.ne[1];
    d.rows = t.w.ne[1];
    d.k = t.w.ne[0];
    return d;
  }
  const Src src = source(pl, t.w, t.w.ne[1] * t.w.ne[2]);
  d.type = src.type;
  d.row_bytes = src.row_bytes;
  d.expert_bytes = src.row_bytes * t.w.ne[1];
  d.rows = t.w.ne[1];
  d.k = t.w.ne[0];
  d.w = tag<const uint8_t>(pl.place({{src.data, static_cast<size_t>(d.expert_bytes * t.w.ne[2])}}));
  return d;
}

void fix(DevLinear& l, uint8_t* base) {
  for (auto& p : l.parts) fix(p.w, base);
  fix(l.row_scale, base);
}

// gemma4's extra per-layer tensors (absent tensors stay nullptr / empty for other archs).
void place_gemma4_layer(Planner& pl, const model::Layer& L, DevLayer& D) {
  if (D.moe) {  // the dense MLP beside the experts
    D.gate_up = place_linear(pl, L.ffn_gate_up);
    D.down = place_linear(pl, L.ffn_down);
  }
  D.post_attn_norm = place_f32(pl, L.post_attn_norm);
  D.post_ffw_norm = place_f32(pl, L.post_ffw_norm);
  D.pre_ffw_norm_2 = place_f32(pl, L.pre_ffw_norm_2);
  D.post_ffw_norm_1 = place_f32(pl, L.post_ffw_norm_1);
  D.post_ffw_norm_2 = place_f32(pl, L.post_ffw_norm_2);
  D.router_in_scale = place_f32(pl, L.router_in_scale);
  D.pl_inp_gate = place_linear(pl, L.pl_inp_gate);
  D.pl_proj = place_linear(pl, L.pl_proj);
  D.pl_post_norm = place_f32(pl, L.pl_post_norm);
  D.out_scale = L.out_scale;
  D.v_from_k = L.v_from_k;
}

void fix_gemma4_layer(DevLayer& D, uint8_t* base) {
  fix(D.post_attn_norm, base);
  fix(D.post_ffw_norm, base);
  fix(D.pre_ffw_norm_2, base);
  fix(D.post_ffw_norm_1, base);
  fix(D.post_ffw_norm_2, base);
  fix(D.router_in_scale, base);
  fix(D.pl_inp_gate, base);
  fix(D.pl_proj, base);
  fix(D.pl_post_norm, base);
}

// FT_NVFP4_TILE: 0 none, "all" every tileable projection, 1 or unset the tuning rule's.
enum class TileMode { kNone, kRule, kAll };
TileMode tile_mode(bool wanted) {
  if (!wanted) return TileMode::kNone;
  const char* e = std::getenv("FT_NVFP4_TILE");
  if (e == nullptr || *e == '\0' || std::string(e) == "1") return TileMode::kRule;
  if (std::string(e) == "0") return TileMode::kNone;
  if (std::string(e) == "all") return TileMode::kAll;
  fail("FT_NVFP4_TILE='{}': expected 0, 1 (the tuning rule, as unset) or all", e);
}

// Stores l's one NVFP4 part tiled (cuda/nvfp4_tiled.h) when the mode and its shape say so and
// no row-major reader shares its bytes; returns whether it did.
bool tile_linear(DevLinear& l, TileMode mode, const std::vector<const uint8_t*>& shared, bool lanes) {
  if (mode == TileMode::kNone || l.parts.size() != 1) return false;
  DevMatrix& p = l.parts[0];
  if (p.type != GgmlType::NVFP4 || p.tiled || !cuda::nvfp4_tile_ok(p.rows, p.k, p.row_bytes) ||
      !cuda::nvfp4_tile_fits(p.row_bytes))
    return false;
  if (mode == TileMode::kRule && !cuda::gemv_nvfp4_tile_wanted(p.rows, p.k)) return false;
  if (std::find(shared.begin(), shared.end(), p.w) != shared.end()) return false;
  // lanes (FT_NVFP4_LANES=1): the pieces lane-major (cuda/nvfp4_tiled.h "Lanes"), for scanned-clean weights
  // only (its tensor-core instances exist only clean).
  p.lanes = lanes && p.scales_clean;
  cuda::nvfp4_tile(const_cast<uint8_t*>(p.w), p.rows, p.row_bytes, nullptr, p.lanes);
  p.tiled = true;
  return true;
}

}  // namespace

DeviceWeights::DeviceWeights(const model::Model& m, const Progress& progress, bool upload_experts, bool tile_nvfp4) {
  Planner pl;
  const auto& te = m.token_embd;
  const Src tes = source(pl, te, te.ne[1]);
  token_embd = {tes.type, tag<const uint8_t>(pl.place({{tes.data, static_cast<size_t>(tes.row_bytes * te.ne[1])}})),
                tes.row_bytes, te.ne[0], te.ne[1], 0, 1.0f};
  output_norm = place_f32(pl, m.output_norm);
  output = place_linear(pl, m.output);

  if (m.per_layer_token_embd) {  // gemma4 per-layer input embeddings
    const auto& pe = m.per_layer_token_embd;
    const Src ps = source(pl, pe, pe.ne[1]);
    per_layer_token_embd = {ps.type, tag<const uint8_t>(pl.place({{ps.data, static_cast<size_t>(ps.row_bytes * pe.ne[1])}})),
                            ps.row_bytes, pe.ne[0], pe.ne[1], 0, 1.0f};
    per_layer_model_proj = place_linear(pl, m.per_layer_model_proj);
    per_layer_proj_norm = place_f32(pl, m.per_layer_proj_norm);
  }
  layers.resize(m.layers.size());
  for (size_t il = 0; il < m.layers.size(); ++il) {
    const model::Layer& L = m.layers[il];
    DevLayer& D = layers[il];
    D.attn_norm = place_f32(pl, L.attn_norm);
    D.qkv = place_linear(pl, L.qkv);
    D.q_norm = place_f32(pl, L.attn_q_norm);
    D.k_norm = place_f32(pl, L.attn_k_norm);
    D.wo = place_linear(pl, L.wo);
    D.ffn_norm = place_f32(pl, L.ffn_norm);
    if (!L.gdn_in.empty()) {  // qwen35 Gated DeltaNet layer
      const engine::DeltaNetShape& g = m.gdn_shape;
      D.gdn_in = place_linear(pl, L.gdn_in);
      D.gdn_out = place_linear(pl, L.gdn_out);
      D.gdn_conv1d = place_raw_f32(pl, L.gdn.conv1d, g.conv_dim() * g.d_conv);
      D.gdn_dt_bias = place_raw_f32(pl, L.gdn.dt_bias, g.n_v_heads);
      D.gdn_a = place_raw_f32(pl, L.gdn.a, g.n_v_heads);
      D.gdn_norm = place_raw_f32(pl, L.gdn.norm, g.d_head);
    }
    D.gate_up_shexp = place_linear(pl, L.ffn_gate_up_shexp);
    D.down_shexp = place_linear(pl, L.ffn_down_shexp);
    D.gate_inp_shexp = place_linear(pl, L.ffn_gate_inp_shexp);
    D.moe = L.is_moe();
    place_gemma4_layer(pl, L, D);
    if (!D.moe) {
      D.gate_up = place_linear(pl, L.ffn_gate_up);
      D.down = place_linear(pl, L.ffn_down);
      continue;
    }
    D.router = place_linear(pl, L.router);
    const engine::ExpertWeights& ew = L.experts;
    DevExperts& X = D.experts;
    X.n_expert = ew.n_expert;
    X.n_embd = ew.n_embd;
    X.n_ff = ew.n_ff;
    X.gelu = ew.glu == engine::Glu::kGelu;
    X.gate = place_experts(pl, ew.gate, upload_experts);
    X.up = place_experts(pl, ew.up, upload_experts);
    X.gate_up = place_experts(pl, ew.gate_up, upload_experts);
    X.down = place_experts(pl, ew.down, upload_experts);
    std::vector<float> bank(static_cast<size_t>(4 * ew.n_expert));
    for (int64_t e = 0; e < ew.n_expert; ++e) {
      bank[4 * e + 0] = ew.gate.scale_of(e);
      bank[4 * e + 1] = ew.up.scale_of(e);
      bank[4 * e + 2] = ew.down.scale_of(e);
      bank[4 * e + 3] = 1.0f;
    }
    X.bank = tag<const float>(pl.place_floats(std::move(bank)));
  }

  arena_ = cuda::DeviceBuffer(pl.total());
  auto* base = arena_.as<uint8_t>();
  pl.upload(base, progress, *m.file);

  fix(token_embd.w, base);
  fix(output_norm, base);
  fix(output, base);
  fix(per_layer_token_embd.w, base);
  fix(per_layer_model_proj, base);
  fix(per_layer_proj_norm, base);
  for (DevLayer& D : layers) {
    fix(D.attn_norm, base);
    fix(D.qkv, base);
    fix(D.q_norm, base);
    fix(D.k_norm, base);
    fix(D.wo, base);
    fix(D.ffn_norm, base);
    fix(D.gate_up, base);
    fix(D.down, base);
    fix(D.router, base);
    fix(D.experts.gate.w, base);
    fix(D.experts.up.w, base);
    fix(D.experts.gate_up.w, base);
    fix(D.experts.down.w, base);
    fix(D.experts.bank, base);
    fix_gemma4_layer(D, base);
    fix(D.gdn_in, base);
    fix(D.gdn_out, base);
    fix(D.gdn_conv1d, base);
    fix(D.gdn_dt_bias, base);
    fix(D.gdn_a, base);
    fix(D.gdn_norm, base);
    fix(D.gate_up_shexp, base);
    fix(D.down_shexp, base);
    fix(D.gate_inp_shexp, base);
  }

  // The dense NVFP4 projections scanned for the UE4M3 NaN codes (cuda/nvfp4_scan.h): the clean ones --
  // every one of a sane file -- take the tensor-core GEMVs without the codes' fix-up (FT_NVFP4_SCAN=0: off).
  // The same bits either way (GpuNvfp4Scan.CleanSessionEqualsCheckedOne). Why on: the fix-up is 74 of the
  // tiled GEMV's 338 SASS instructions a 4,096-weight step (bench/sass_local.sh), and the kernel's own work is
  // what holds it on the H200. H100 session 49, the weights in L2 (ft-bench-gemv-cuda --direct --copies 1, off
  // HBM's limit: the time the kernel's work takes): 4096x14336 10.55 -> 9.44 us, 14336x4096 11.07 -> 9.86,
  // 6144x4096 5.30 -> 4.66 -- the checked 10.55 is about the H200's 11.21 us from HBM (session 31). End to end on
  // an H100, where HBM holds the GEMVs, it is neutral: Llama-8B tg128 alternating, eagerly loaded, session 45
  // +0.4% (10 rounds), session 49 +0.18% (6 rounds, t 0.6); Qwen3-30B-A3B 496.94 against 495.69.
  const char* scan_env = std::getenv("FT_NVFP4_SCAN");
  const bool scan_on = scan_env == nullptr || std::string(scan_env) != "0";
  auto scan = [this](DevLinear& l) {
    for (DevMatrix& p : l.parts)
      if (p.type == GgmlType::NVFP4 && p.w != nullptr) {
        p.scales_clean = cuda::nvfp4_scales_clean(p.w, p.rows, p.row_bytes, p.k);
        clean_count_ += p.scales_clean ? 1 : 0;
      }
  };
  if (scan_on) {
    scan(output);
    for (DevLayer& D : layers)
      for (DevLinear* l : dense_projections(D)) scan(*l);
  }

  // The layers' dense projections tiled in place (row-major readers of the same bytes -- the
  // embeddings, the output head -- keep them row-major).
  const TileMode mode = tile_mode(tile_nvfp4);
  // Tiled pieces lane-major (cuda/nvfp4_tiled.h "Lanes") on GPUs whose HBM outruns the tiled kernel's own work
  // (cuda/gemv_tuning.h nvfp4_lanes_default: the H200, not the H100); FT_NVFP4_LANES=1 / 0 forces them on / off.
  const char* lanes_env = std::getenv("FT_NVFP4_LANES");
  const bool lanes = lanes_env != nullptr && *lanes_env != '\0' ? std::string(lanes_env) == "1"
                                                                 : cuda::nvfp4_lanes_default(cuda::peak_dram_gbs());
  if (mode != TileMode::kNone) {
    std::vector<const uint8_t*> shared{token_embd.w, per_layer_token_embd.w};
    for (const DevMatrix& p : output.parts) shared.push_back(p.w);
    for (DevLayer& D : layers)
      for (DevLinear* l : dense_projections(D))
        if (tile_linear(*l, mode, shared, lanes)) {
          ++tiled_count_;
          lanes_count_ += l->parts[0].lanes ? 1 : 0;
        }
    FT_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

}  // namespace ft::gpu
