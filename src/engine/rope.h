// Rotary position embedding with ggml's semantics (README §C.4): NORM pairs (2i, 2i+1),
// NEOX pairs (i, i + n_rot/2), optional per-pair frequency divisors (rope_freqs), linear and
// YaRN scaling. Elements [n_rot, head_dim) are left unchanged.
//
// theta is built like ggml-cpu: theta = p, then theta *= base^(-2/n_rot) once per pair in
// fp32, so our angles match llama.cpp's CPU angles bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/exec.h"
#include "model/hparams.h"

namespace ft::engine {

// cos/sin of every pair for a run of positions, computed once per forward and shared by
// all layers (and by Q and K).
class RopeCache {
 public:
  // Fills the table for positions pos0 .. pos0+n_tok-1. freq_factors: n_rot/2 values or nullptr.
  void build(const model::RopeParams& p, const float* freq_factors, int64_t pos0, int64_t n_tok);
  // {cos, sin} of pair i at token t: cs(t)[2i], cs(t)[2i+1].
  const float* cs(int64_t t) const { return data_.data() + t * n_rot_; }
  int n_rot() const { return n_rot_; }
  model::RopeType type() const { return type_; }

 private:
  std::vector<float> data_;
  int n_rot_ = 0;
  model::RopeType type_ = model::RopeType::kNorm;
};

// The {cos, sin} pairs of one position (the scalar definition the cache uses).
void rope_angles(const model::RopeParams& p, const float* freq_factors, int64_t pos, float* cs);

// Rotates n_head heads of hd elements for each of n_tok rows (ld apart), in place.
void rope_apply(const Exec& ex, const RopeCache& rc, float* x, int64_t ld, int64_t n_tok,
                int64_t n_head, int64_t hd);

}  // namespace ft::engine
