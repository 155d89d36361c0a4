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

// The current device's SM count, the shared memory a block may opt in to, and an SM's shared memory (bytes),
// each asked once per device (no sync: capture-safe). A CUDA error throws, so only with a device.
int sm_count();
int max_smem_optin();
int max_smem_per_sm();
// The current device's peak DRAM bandwidth in GB/s from its memory clock and bus width (2 transfers a clock):
// H100 SXM 3,352, H200 4,915. 0 where the driver reports neither.
double peak_dram_gbs();

// FT_CUDA_CACHE_CONFIG=none|shared|l1|equal (a diagnostic knob): the device-wide L1 / shared-memory
// preference (cudaDeviceSetCacheConfig) for kernels that set none themselves; unset, the driver's
// choice. H200 session 30: ft's decode ran 2-3% slower after a prefill in the same process; whether the
// split the prefill's large-shared-memory kernels leave behind is why is what it tests. Returns the
// setting applied ("" when unset); an unknown value fails naming the variable and the choices.
std::string apply_cache_config_env();

// "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB, L2 60 MiB" for device `dev`.
std::string device_summary(int dev = 0);

}  // namespace ft::cuda
