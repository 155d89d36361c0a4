// Which CUDA device is there, if any. Nothing here throws when no GPU or driver is present:
// GPU-less machines (CI) build and link the CUDA code and must still run.
#pragma once

#include <string>

namespace ft::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no GPU.
int device_count();
inline bool has_device() { return device_count() > 0; }

// Whether the current device runs the bulk-copy kernels (cp.async.bulk with mbarrier
// transactions: sm_90 and newer; they compile to nothing for older targets, so they must never
// be launched there). False without a device.
bool bulk_copy_supported();

// "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB, L2 60 MiB" for device `dev`.
std::string device_summary(int dev = 0);

}  // namespace ft::cuda
