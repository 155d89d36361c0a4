#!/usr/bin/env bash
# Session 52 call 2 (~180 s, any GPU): the batch GEMV's tests with stages forced; ft-bench-gemv-cuda --batch with
# the stage sweep (2 / 3 / 4 against the table's 3 at 4 warps, 2 at 8); the GPU batch runner's decode tokens/s on
# Llama-8B, batch kernel on / off alternating (ft-bench-batch was not packed in call 1).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 230 bash bench/session52/call2.sh", carry=[".devcarry/pack"])
R=/tmp/res52b
source bench/device_common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4
gpu_tests 60 'CudaGemvBatch.*:GpuNvfp4Batch.*'
log "ft-bench-gemv-cuda --batch"
timeout 60 "$B/ft-bench-gemv-cuda" --batch > "$R/gemv_batch.txt" 2>&1
grep -E "HBM|^\| (batch|slab)" "$R/gemv_batch.txt" | sed 's/ nvfp4 | q8    |//; s/  */ /g'
models_wait
for round in 1 2; do
  for mode in 1 0; do
    budget 170 "batch runner round $round mode $mode" || break
    log "ft-bench-batch FT_GEMV_NVFP4_MMA_BATCH=$mode round $round"
    FT_GEMV_NVFP4_MMA_BATCH=$mode CUDA_MODULE_LOADING=EAGER timeout 60 "$B/ft-bench-batch" --model "$L" --device cuda \
      --batch 1,2,3,4,6,8 --prompt 32 --steps 64 > "$R/batch_${mode}_$round.txt" 2>&1
    grep -E "B=|Session|rror" "$R/batch_${mode}_$round.txt"
  done
done
finish res52b
