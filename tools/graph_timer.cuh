// The benches' timer: launches captured into one CUDA graph, replayed 7 times between a
// cudaEvent pair after one warm-up replay; the median replay is the figure (it drops a first
// replay that still pays for cold TLBs and a stray slow one).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "cuda/check.h"

namespace ft::tools {

// Median of 7 runs of launch() on `s` between a cudaEvent pair, after one warm-up run, in ms.
template <class F>
float events_median_ms(cudaStream_t s, F&& launch) {
  cudaEvent_t a, b;
  FT_CUDA_CHECK(cudaEventCreate(&a));
  FT_CUDA_CHECK(cudaEventCreate(&b));
  launch();  // warm-up
  std::vector<float> ms;
  for (int r = 0; r < 7; ++r) {
    FT_CUDA_CHECK(cudaEventRecord(a, s));
    launch();
    FT_CUDA_CHECK(cudaEventRecord(b, s));
    FT_CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    FT_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  FT_CUDA_CHECK(cudaEventDestroy(a));
  FT_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[3];
}

// Median of 7 replays of `exec` on `s`, in ms per replay.
inline float graph_median_ms(cudaGraphExec_t exec, cudaStream_t s) {
  return events_median_ms(s, [&] { FT_CUDA_CHECK(cudaGraphLaunch(exec, s)); });
}

// Captures what launch() enqueues on `s` into a graph and returns graph_median_ms of it.
template <class F>
float capture_median_ms(cudaStream_t s, F&& launch) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  FT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  launch();
  FT_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  FT_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  const float ms = graph_median_ms(e, s);
  FT_CUDA_CHECK(cudaGraphExecDestroy(e));
  FT_CUDA_CHECK(cudaGraphDestroy(g));
  return ms;
}

}  // namespace ft::tools
