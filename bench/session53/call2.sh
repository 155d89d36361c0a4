#!/usr/bin/env bash
# Session 53 call 2 (~150 s, any GPU; on an H200 session 51's h200.sh instead): the GPU batch runner's one-sequence
# steps (GpuForward::set_solo) -- GpuBatch tests (bitwise against the session), ft-bench-batch with FT_BATCH_SOLO=1 / 0
# alternating -- and the batch GEMV's stage table by tokens (ft-bench-gemv-cuda --batch: the table's row beside 2/3/4).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session53/call2.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
source bench/session53/h200_or.sh
R=/tmp/res53b
source bench/device_common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4
gpu_tests 90 'GpuBatch*:CudaGemvBatch.*:GpuNvfp4Batch.*'
grep -E "GPU-BATCH" "$R/test.txt" | head -30
log "ft-bench-gemv-cuda --batch"
timeout 60 "$B/ft-bench-gemv-cuda" --batch > "$R/gemv_batch.txt" 2>&1
grep -E "HBM|^\| (batch|slab)" "$R/gemv_batch.txt" | grep -v slab | sed 's/ nvfp4 | q8    |//; s/  */ /g'
models_wait
for round in 1 2; do
  for mode in 1 0; do
    budget 200 "batch runner round $round solo $mode" || break
    log "ft-bench-batch FT_BATCH_SOLO=$mode round $round"
    FT_BATCH_SOLO=$mode CUDA_MODULE_LOADING=EAGER timeout 60 "$B/ft-bench-batch" --model "$L" --device cuda \
      --batch 1,2,4,8 --prompt 32 --steps 64 > "$R/batch_${mode}_$round.txt" 2>&1
    grep -E "B=|Session|rror" "$R/batch_${mode}_$round.txt"
  done
done
finish res53b
