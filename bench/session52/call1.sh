#!/usr/bin/env bash
# Session 52 call 1 (~400 s, any GPU): the batch tensor-core GEMV (src/cuda/gemv_mma_batch.cu) -- its tests and the
# tiled / lanes / session tests around it, its kernel times against the slab kernel (ft-bench-gemv-cuda --batch),
# the GPU batch runner's decode tokens/s on Llama-8B with it on / off (ft-bench-batch --device cuda), then test_cuda
# (all) in what is left.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session52/call1.sh", carry=[".devcarry/pack"])
R=/tmp/res52a
source bench/device_common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4
log "tests: batch kernel, tiled, lanes, sessions"
gpu_tests 240 'CudaGemvBatch.*:CudaNvfp4Lanes.*:CudaNvfp4Tiled.*:GpuNvfp4Tiled.*:GpuNvfp4Lanes.*:GpuNvfp4Batch.*:GpuNvfp4Scan.*'
cp "$R/test.txt" "$R/test_batch.txt"
grep -E "BATCH|TILED" "$R/test_batch.txt"
log "ft-bench-gemv-cuda --batch"
timeout 120 "$B/ft-bench-gemv-cuda" --batch > "$R/gemv_batch.txt" 2>&1
grep -E "HBM|^\| (batch|slab)" "$R/gemv_batch.txt"
models_wait
for round in 1 2; do
  for mode in 1 0; do
    budget 420 "batch runner round $round mode $mode" || break
    log "ft-bench-batch FT_GEMV_NVFP4_MMA_BATCH=$mode round $round"
    FT_GEMV_NVFP4_MMA_BATCH=$mode CUDA_MODULE_LOADING=EAGER timeout 90 "$B/ft-bench-batch" --model "$L" --device cuda \
      --batch 1,2,3,4,6,8 --prompt 32 --steps 64 > "$R/batch_${mode}_$round.txt" 2>&1
    grep -E "B=|Session|rror" "$R/batch_${mode}_$round.txt"
  done
done
log "test_cuda (all)"
gpu_tests_until 575
grep -E "FAILED|Failure" "$R/test_all.txt" | head -20
finish res52a
