// MoE routing (moe_route.h): one block of 128 threads per token. The probabilities live in
// shared memory; each thread ranks its experts by counting the experts with a larger
// probability (n_expert^2 / 128 compares: 128 for 128 experts) and flags a tie when an
// expert of rank < n_used shares its probability with another one. Only then does thread 0
// redo the selection with the std::sort twin (about 10 us for 128 experts, only on ties).
#include "cuda/moe_route.h"

#include <string>

#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/ops_reduce.cuh"
#include "cuda/pdl.cuh"
#include "cuda/stl_sort.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxUsed = 64;
constexpr float kWeightSumMin = 6.103515625e-5f;  // engine::kMoeWeightSumMin

struct ByProbDesc {
  const float* probs;
  __device__ bool operator()(int32_t a, int32_t b) const { return probs[a] > probs[b]; }
};

__global__ void moe_route_kernel(const float* logits, int64_t ld, int n_expert, int n_used, int32_t* ids,
                                 float* weights) {
  pdl_wait();
  pdl_trigger();
  extern __shared__ float smem[];
  float* probs = smem;                                         // [n_expert]
  int32_t* order = reinterpret_cast<int32_t*>(smem + n_expert);  // [n_expert], tie path only
  __shared__ float scratch_f[32];
  __shared__ double scratch_d[32];
  __shared__ int32_t sel[kMaxUsed];
  __shared__ int tie;
  const int64_t t = blockIdx.x;
  const float* l = logits + t * ld;

  float mx = -INFINITY;
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) mx = fmaxf(mx, l[e]);
  mx = ops::block_max(mx, scratch_f);
  double sum = 0.0;
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
    const float v = ops::exp_f32(ops::sub_rn(l[e], mx));
    probs[e] = v;
    sum += static_cast<double>(v);
  }
  sum = ops::block_sum(sum, scratch_d);
  const float inv = static_cast<float>(1.0 / sum);
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) probs[e] = ops::mul_rn(probs[e], inv);
  if (threadIdx.x == 0) tie = 0;
  __syncthreads();

  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
    const float p = probs[e];
    int gt = 0, eq = 0;
    for (int j = 0; j < n_expert; ++j) {
      const float q = probs[j];
      gt += q > p;
      eq += q == p;
    }
    if (gt < n_used) {
      if (eq > 1) tie = 1;  // eq counts e itself
      else sel[gt] = e;
    }
  }
  __syncthreads();

  if (threadIdx.x != 0) return;
  if (tie) {
    for (int e = 0; e < n_expert; ++e) order[e] = e;
    stl_sort::sort(order, n_expert, ByProbDesc{probs});
    for (int r = 0; r < n_used; ++r) sel[r] = order[r];
  }
  double wsum = 0.0;
  for (int r = 0; r < n_used; ++r) wsum += static_cast<double>(probs[sel[r]]);
  const float denom = fmaxf(static_cast<float>(wsum), kWeightSumMin);
  for (int r = 0; r < n_used; ++r) {
    ids[t * n_used + r] = sel[r];
    weights[t * n_used + r] = ops::div_rn(probs[sel[r]], denom);
  }
}

}  // namespace

void moe_route(const float* logits, int64_t ld, int64_t n_expert, int64_t n_tok, int n_used, int32_t* ids,
               float* weights, cudaStream_t s) {
  if (n_tok <= 0) return;
  if (n_expert <= 0 || n_expert > kMoeRouteMaxExperts)
    fail_message("moe_route: n_expert " + std::to_string(n_expert) + " must be in [1, " +
                 std::to_string(kMoeRouteMaxExperts) + "]");
  if (n_used <= 0 || n_used > n_expert || n_used > kMaxUsed)
    fail_message("moe_route: n_used " + std::to_string(n_used) + " must be in [1, min(n_expert, " +
                 std::to_string(kMaxUsed) + ")]");
  if (n_tok > 0x7fffffff) fail_message("moe_route: " + std::to_string(n_tok) + " tokens exceed the grid limit");
  const size_t smem = static_cast<size_t>(n_expert) * (sizeof(float) + sizeof(int32_t));
  launch_pdl(moe_route_kernel, dim3(static_cast<unsigned>(n_tok)), dim3(kThreads), smem, s, logits,
             ld, static_cast<int>(n_expert), n_used, ids, weights);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
