#!/usr/bin/env bash
# Session 49, call 2 (~200 s): the NVFP4 scale scan on by default -- the GPU session and NVFP4 tests on main's
# binaries (GpuNvfp4Scan.CleanSessionEqualsCheckedOne now compares FT_NVFP4_SCAN=0 with the default), then the
# remaining GPU-vs-CPU session tests as time allows. One tarball back ($OUT keeps at most a few files).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 230 bash bench/session49/call2.sh", carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
log "test_cuda NVFP4 / scan / GPU sessions"
gpu_tests 200 'CudaNvfp4*:GpuNvfp4*:*Scan*:Gpu*'
finish resb
