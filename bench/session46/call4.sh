#!/usr/bin/env bash
# Session 46, call 4 (the device time left after call 3's loss): test_cuda on the code the review mends and the
# device-attribute merge touched -- the tiled launches (the after-GEMV rule now counts sm_count()), the scanned
# instances (mma_tiled_instance), the decode attention (its split plan's sm_count, the ring's max_smem_per_sm),
# the tensor-core GEMVs. Then one Llama-8B tg128 row if time is left.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 150 bash bench/session46/call4.sh", carry=[".devcarry/pack"])
R=/tmp/res4
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
log "test_cuda (tiled, scan, attention decode, mma)"
gpu_tests 100 'CudaNvfp4Tiled.*:CudaNvfp4Scan.*:GpuNvfp4Scan.*:GpuNvfp4Tiled.*:CudaGemvPersist.*:CudaGemvTma.*:CudaGemvNvfp4.*:CudaAttention*:GpuAttentionMma.*:Models/GpuVsCpu.*'
grep -E '^\[ +(OK|FAILED) ' "$R/test.txt" | awk '{print $2}' | sort | uniq -c | tee -a "$R/log.txt"
finish res4
