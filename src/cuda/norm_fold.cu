// The norm fold's stand-alone launches and host twins (norm_fold.h).
#include "cuda/norm_fold.h"

#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/norm_fold.cuh"
#include "cuda/pdl.cuh"

namespace ft::cuda {
namespace {

void check_n(const char* what, int64_t n) {
  if (n <= 0 || n % 32 != 0 || n > kNormFoldMaxN)
    fail_message(std::string(what) + ": row length " + std::to_string(n) + " must be a positive multiple of 32, at most " +
                 std::to_string(kNormFoldMaxN));
}

// One CTA of 8 warps; warp w takes blocks w, w + 8, ...
__global__ void produce_kernel(const float* y, const float* w, int64_t n, uint8_t* xq, double* part) {
  pdl_wait();
  pdl_trigger();
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  for (int blk = warp; blk < static_cast<int>(n / 32); blk += static_cast<int>(blockDim.x) >> 5)
    norm_fold::block_warp(y[32 * blk + lane], norm_fold::weight_of(w, blk), blk, n, xq, part);
}

// One warp.
__global__ void apply_kernel(uint8_t* xq, int64_t n, const double* part, float eps) {
  pdl_wait();
  pdl_trigger();
  double pv[norm_fold::kMaxPartsPerLane];
  norm_fold::load_parts(part, static_cast<int>(n / 32), pv);
  const float inv = norm_fold::inv_rms(pv, n, eps);
  auto* sc = reinterpret_cast<ActQ8Scale*>(xq + n);
  for (int b = static_cast<int>(threadIdx.x); b < static_cast<int>(n / 32); b += 32)
    sc[b].d = norm_fold::fix_scale(sc[b].d, inv);
}

}  // namespace

void norm_fold_produce(const float* y, const float* w, int64_t n, void* xq, double* part, cudaStream_t s) {
  check_n("norm_fold_produce", n);
  launch_pdl(produce_kernel, dim3(1), dim3(256), 0, s, y, w, n, static_cast<uint8_t*>(xq), part);
  FT_CUDA_CHECK_LAUNCH();
}

void norm_fold_apply(void* xq, int64_t n, const double* part, float eps, cudaStream_t s) {
  check_n("norm_fold_apply", n);
  launch_pdl(apply_kernel, dim3(1), dim3(32), 0, s, static_cast<uint8_t*>(xq), n, part, eps);
  FT_CUDA_CHECK_LAUNCH();
}

void norm_fold_produce_ref(const float* y, const float* w, int64_t n, void* xq_row, double* part) {
  check_n("norm_fold_produce_ref", n);
  std::vector<float> u(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) u[static_cast<size_t>(i)] = y[i] * w[i];
  quantize_act_q8_row_ref(u.data(), n, xq_row);  // the codes; the scales made raw below
  auto* b = static_cast<uint8_t*>(xq_row);
  for (int64_t j = 0; j < n / 32; ++j) {
    float amax = 0.0f;
    double sq[32];
    for (int i = 0; i < 32; ++i) {
      amax = std::fmax(amax, std::fabs(u[static_cast<size_t>(32 * j + i)]));
      sq[i] = static_cast<double>(y[32 * j + i] * y[32 * j + i]);
    }
    for (int o = 16; o > 0; o >>= 1) {  // the warp's xor tree: lane i adds lane i ^ o
      double t[32];
      for (int i = 0; i < 32; ++i) t[i] = sq[i] + sq[i ^ o];
      std::memcpy(sq, t, sizeof sq);
    }
    const float d = amax / 127.0f;
    std::memcpy(b + n + 8 * j, &d, 4);  // ActQ8Scale::d
    part[j] = sq[0];
  }
}

float norm_fold_inv_rms_ref(const double* part, int64_t n, float eps) {
  check_n("norm_fold_inv_rms_ref", n);
  const int n_blk = static_cast<int>(n / 32);
  double s[32];
  for (int l = 0; l < 32; ++l) {  // lane l: blocks l, l + 32, ... in order
    s[l] = l < n_blk ? part[l] : 0.0;
    for (int j = 1; j < norm_fold::kMaxPartsPerLane; ++j) s[l] += l + 32 * j < n_blk ? part[l + 32 * j] : 0.0;
  }
  for (int o = 16; o > 0; o >>= 1) {
    double t[32];
    for (int i = 0; i < 32; ++i) t[i] = s[i] + s[i ^ o];
    std::memcpy(s, t, sizeof s);
  }
  const float mean = static_cast<float>(s[0] / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}

void norm_fold_apply_ref(void* xq_row, int64_t n, const double* part, float eps) {
  const float inv = norm_fold_inv_rms_ref(part, n, eps);
  auto* b = static_cast<uint8_t*>(xq_row);
  for (int64_t j = 0; j < n / 32; ++j) {
    ActQ8Scale sc;
    std::memcpy(&sc, b + n + 8 * j, 8);
    sc.d = __half2float(__float2half_rn(sc.d * inv));
    std::memcpy(b + n + 8 * j, &sc, 8);
  }
}

}  // namespace ft::cuda
