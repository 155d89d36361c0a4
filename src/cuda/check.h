// One checked-call macro for CUDA runtime and cuBLAS status codes:
//
//   FT_CUDA_CHECK(cudaMalloc(&p, n));      FT_CUDA_CHECK(cublasCreate(&h));
//   kernel<<<...>>>(...); FT_CUDA_CHECK_LAUNCH();
//
// A failure throws ft::Error "FILE:LINE: CALL failed: cudaErrorMemoryAllocation (out of
// memory)", so the CLI reports it like any other error a user can act on.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <string>

namespace ft::cuda {

[[noreturn]] void fail_call(const char* error_name, const char* what, const char* call, const char* file,
                            int line);

// Throws ft::Error(msg): for CUDA translation units, which do not include fmt.
[[noreturn]] void fail_message(const std::string& msg);

// Name of a cuBLAS status (cublasGetStatusName lives in libcublas; this keeps the macro free
// of that library for code that only uses the runtime).
const char* cublas_status_name(cublasStatus_t s);

inline void check_call(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) fail_call(cudaGetErrorName(e), cudaGetErrorString(e), call, file, line);
}

inline void check_call(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) fail_call(cublas_status_name(s), "cuBLAS", call, file, line);
}

}  // namespace ft::cuda

#define FT_CUDA_CHECK(call) ::ft::cuda::check_call((call), #call, __FILE__, __LINE__)
#define FT_CUDA_CHECK_LAUNCH() ::ft::cuda::check_call(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
