// The integer path's row-group driver (gpu_dot.h, gpu_dot_q8_rows), shared by the AVX2 and
// the AVX-512 rows: the plan's fold, each row group's row offsets, the next group's
// prefetch, the kernel's terms and the lanes back to rows. Included only by
// gpu_dot_avx2.cpp and gpu_dot_avx512.cpp, each instantiating it with its own row kernels K,
// so that it compiles with that file's ISA flags and inlines into the same code as the two
// copies it replaces. No intrinsics here.
//
// K provides:
//   kG                      rows per group (SIMD lanes of the fold)
//   Folder                  lanes, unit_log2, start(), add(is, sc), finish(float* out)
//   needs_aux(type)         whether terms() reads the activations' GpuActAux
//   lane_rows(type)         const int*: lane l of finish()'s output is row lane_rows[l] of the group
//   terms(type, w, offs, x, aux, k, folder, next_group)
//                           every term of the group's rows (row r at w + offs[r]), in order
#pragma once

#include <algorithm>
#include <cstdint>

#include "moe_cpu/gpu_dot.h"

namespace ft::moe_cpu::detail {

template <class K>
bool gpu_dot_q8_row_groups(const GpuDotPlan& plan, GgmlType type, const uint8_t* w, int64_t row_bytes,
                           int64_t n_rows, const GpuActQ8& x, int64_t k, float* out) {
  const bool nv = type == GgmlType::NVFP4;
  if (!nv && type != GgmlType::Q8_0 && type != GgmlType::MXFP4) return false;
  // 32-bit row offsets within a group (the kernels' gathers).
  if (row_bytes > (int64_t{1} << 30) / K::kG) return false;
  typename K::Folder f;
  if (nv && plan.kind == GpuDot::kNvfp4Packed) {
    f.lanes = 0;
  } else {
    f.lanes = nv && plan.kind == GpuDot::kNvfp4Slab ? 32 : plan.lanes;
    f.unit_log2 = nv ? 2 : 1;  // terms per lane unit: NVFP4 block 4; Q8_0 / MXFP4 unit 2
  }
  thread_local GpuActAux own;
  const GpuActAux* aux = x.aux;
  if (aux == nullptr && K::needs_aux(type)) {
    gpu_act_aux(type, x, k, own);
    aux = &own;
  }
  const int* lane_row = K::lane_rows(type);
  for (int64_t g0 = 0; g0 < n_rows; g0 += K::kG) {
    alignas(64) int32_t offs[K::kG];  // rows past the end repeat the last row
    for (int r = 0; r < K::kG; ++r) offs[r] = static_cast<int32_t>(std::min<int64_t>(r, n_rows - 1 - g0) * row_bytes);
    f.start();
    const NextGroup ng(w, row_bytes, g0, K::kG, n_rows, nv ? k / 64 : k / 32);
    K::terms(type, w + g0 * row_bytes, offs, x, aux, k, f, ng);
    alignas(64) float o[K::kG];
    f.finish(o);
    for (int l = 0; l < K::kG; ++l)
      if (g0 + lane_row[l] < n_rows) out[g0 + lane_row[l]] = o[l];
  }
  return true;
}

}  // namespace ft::moe_cpu::detail
