#!/usr/bin/env bash
# Session 49, call 1 (~280 s): is the tiled GEMV held by its own per-weight work, and does the scan build pay
# where HBM is faster than that work (an H200)? Session 48's call 1 less its SASS dump (now made on the build
# machine: bench/sass_local.sh; the scanned loop is 264 SASS instructions a step against the checked 338).
# 1. test_cuda CudaNvfp4Tiled.* / GpuNvfp4Tiled.* / *Nvfp4Scan.* (AfterGemvLaunchEqualsThePlainOne has not yet
#    run on a GPU).
# 2. ft-bench-gemv-cuda --direct (the register-fed prototype beside the tiled kernel, checked and clean), from
#    HBM and from L2 (--copies 1: the 33 MB and smaller matrices stay in the 50 MB L2; 28672x4096, 66 MB, not),
#    and the plain read of the same bytes from L2.
# 3. Llama-8B tg128, FT_NVFP4_SCAN=0 / 1 alternating, eagerly loaded, until 270 s.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 290 bash bench/session49/call1.sh", carry=[".devcarry/pack"])
R=/tmp/res1
source bench/device_common.sh
source bench/session49/probes.sh
gpu_preamble 40 'CudaNvfp4Tiled.*:GpuNvfp4Tiled.*:*Nvfp4Scan.*' llama8b-nvfp4
direct_probes
snap res1
AB_BUDGET=270 ab_envs 6 "$L" "FT_NVFP4_SCAN=0" "FT_NVFP4_SCAN=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
finish res1
