// Run-time choice of the matmul kernel family (see core/cpu_features.h).
#include "quant/matmul.h"

#include <vector>

#include "core/error.h"
#include "quant/dequant.h"
#include "quant/matmul_kernels.h"

namespace ft::quant {
namespace {

void check_args(const MatmulArgs& a, int64_t r0, int64_t r1) {
  if (!matmul_supported(a.type)) fail("matmul: no kernel for weight type {}", type_name(a.type));
  const auto& tr = traits(a.type);
  if (a.k <= 0 || a.k % tr.block_size != 0) {
    fail("matmul: k = {} is not a positive multiple of the {} block size {}", a.k, type_name(a.type), tr.block_size);
  }
  if (a.row_bytes < row_bytes(a.type, a.k)) {
    fail("matmul: row stride {} B is shorter than a {} row of {} elements", a.row_bytes, type_name(a.type), a.k);
  }
  if (r0 < 0 || r1 < r0 || a.n_tok < 0) fail("matmul: bad row range [{}, {}) or n_tok {}", r0, r1, a.n_tok);
}

// The q8 route for types without integer kernels: the fp32 kernels of `isa` on X rounded
// as ggml rounds it (the same definition matmul_ref uses).
void matmul_round_trip(Isa isa, const MatmulArgs& a, int64_t r0, int64_t r1) {
  const GgmlType dot = act_dot_type(a.type);
  thread_local std::vector<float> xr;
  xr.resize(static_cast<size_t>(a.n_tok * a.k));
  for (int64_t t = 0; t < a.n_tok; ++t) round_trip_act(dot, a.x + t * a.ldx, xr.data() + t * a.k, a.k);
  MatmulArgs b = a;
  b.x = xr.data();
  b.ldx = a.k;
  b.act_quant = ActQuant::kNone;
  matmul_on(isa, b, r0, r1);
}

}  // namespace

bool matmul_supported(GgmlType t) { return has_ref_dequant(t); }

void matmul_on(Isa isa, const MatmulArgs& a, int64_t r0, int64_t r1) {
  check_args(a, r0, r1);
  if (r1 == r0 || a.n_tok == 0) return;
  if (!isa_supported(isa)) fail("matmul: this CPU cannot run the {} kernels", isa_name(isa));
  if (a.act_quant == ActQuant::kQ8 && isa != Isa::kScalar && detail::ggml_takes_vec_dot(a))
    return detail::matmul_vec_dot(a, r0, r1);
  if (a.act_quant == ActQuant::kQ8 && isa != Isa::kScalar && act_dot_type(a.type) != GgmlType::F32) {
    if (detail::matmul_q8_avx2_has(a.type)) return detail::matmul_q8_avx2(a, r0, r1);
    if (act_dot_type(a.type) == GgmlType::Q8_1) return detail::matmul_q8_1(a, r0, r1);
    return matmul_round_trip(isa, a, r0, r1);
  }
  switch (isa) {
    case Isa::kAvx512:
      return detail::matmul_avx512(a, r0, r1);
    case Isa::kAvx2:
      return detail::matmul_avx2(a, r0, r1);
    case Isa::kScalar:
      return matmul_ref(a, r0, r1);
  }
}

void matmul(const MatmulArgs& a, int64_t r0, int64_t r1) { matmul_on(active_isa(), a, r0, r1); }

const char* matmul_isa() { return isa_name(active_isa()); }

}  // namespace ft::quant
