#include "cuda/moe_cpu_io.h"

#include "cuda/check.h"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

// One block per token row of h (plus row 0 writing the header, ids and wts). Writes to
// mapped memory go over PCIe as posted writes; the stream's following write-value op
// fences them (cuStreamWriteValue32 without NO_MEMORY_BARRIER) before the ready flag.
__global__ void pack_kernel(const float* h, int64_t ldh, int64_t n_embd, int n_tok, const int32_t* ids,
                            const float* wts, int n_used, int32_t layer, uint8_t* task, size_t h_off, size_t ids_off,
                            size_t wts_off) {
  const int t = blockIdx.x;
  float* dst = reinterpret_cast<float*>(task + h_off) + static_cast<int64_t>(t) * n_embd;
  const float* src = h + static_cast<int64_t>(t) * ldh;
  for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) dst[i] = src[i];
  if (t != 0) return;
  const int n = n_tok * n_used;
  int32_t* di = reinterpret_cast<int32_t*>(task + ids_off);
  float* dw = reinterpret_cast<float*>(task + wts_off);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    di[i] = ids[i];
    dw[i] = wts[i];
  }
  if (threadIdx.x == 0) {
    auto* hd = reinterpret_cast<MoeCpuTaskHeader*>(task);
    hd->n_tok = n_tok;
    hd->n_used = n_used;
    hd->layer = layer;
    hd->pad = 0;
  }
}

// One thread: at most kGemvMaxTokens x n_used guesses, in rank order.
__global__ void hint_kernel(const int32_t* ids, int n, int32_t layer, uint8_t* hint, const int32_t* slot_of,
                            int skip) {
  auto* hd = reinterpret_cast<MoeCpuHintHeader*>(hint);
  int32_t* dst = reinterpret_cast<int32_t*>(hint + sizeof(MoeCpuHintHeader));
  int out = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t e = ids[i];
    if (e < 0 || (slot_of != nullptr && slot_of[e] >= 0)) continue;
    if (slot_of != nullptr && skip > 0) {
      --skip;
      continue;
    }
    dst[out++] = e;
  }
  hd->n = out;
  __threadfence_system();
  *reinterpret_cast<volatile int32_t*>(&hd->tag) = layer;
}

__global__ void add_kernel(const float* out, int64_t n_embd, float* x, int64_t ldx) {
  const int t = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n_embd) x[t * ldx + i] += out[t * n_embd + i];
}

}  // namespace

MoeCpuTaskLayout moe_cpu_task_layout(int64_t n_embd, int64_t max_tok, int64_t n_used) {
  MoeCpuTaskLayout l;
  l.n_embd = n_embd;
  l.max_tok = max_tok;
  l.n_used = n_used;
  l.h_off = align16(sizeof(MoeCpuTaskHeader));
  l.ids_off = align16(l.h_off + sizeof(float) * static_cast<size_t>(n_embd * max_tok));
  l.wts_off = align16(l.ids_off + sizeof(int32_t) * static_cast<size_t>(max_tok * n_used));
  l.bytes = align16(l.wts_off + sizeof(float) * static_cast<size_t>(max_tok * n_used));
  return l;
}

void moe_cpu_pack(const MoeCpuTaskLayout& lay, const float* h, int64_t ldh, int64_t n_tok, const int32_t* ids,
                  const float* wts, int n_used, int32_t layer, uint8_t* task, cudaStream_t s) {
  if (n_tok < 1 || n_tok > lay.max_tok || n_used != lay.n_used)
    fail_message("moe_cpu_pack: " + std::to_string(n_tok) + " tokens x " + std::to_string(n_used) +
                 " ranks do not fit the task buffer");
  pack_kernel<<<static_cast<unsigned>(n_tok), kThreads, 0, s>>>(h, ldh, lay.n_embd, static_cast<int>(n_tok), ids, wts,
                                                                 n_used, layer, task, lay.h_off, lay.ids_off,
                                                                 lay.wts_off);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_cpu_hint(const int32_t* ids, int n, int32_t layer, uint8_t* hint, cudaStream_t s, const int32_t* slot_of,
                  int skip) {
  if (n <= 0) return;
  hint_kernel<<<1, 1, 0, s>>>(ids, n, layer, hint, slot_of, skip);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_cpu_add(const float* out, int64_t n_tok, int64_t n_embd, float* x, int64_t ldx, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((n_embd + kThreads - 1) / kThreads), static_cast<unsigned>(n_tok));
  add_kernel<<<grid, kThreads, 0, s>>>(out, n_embd, x, ldx);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
