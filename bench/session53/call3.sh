#!/usr/bin/env bash
# Session 53 call 3 (~240 s, any GPU; on an H200 session 51's h200.sh instead): the GPU batch runner -- one-sequence
# steps (FT_BATCH_SOLO), the batch attention's split over keys (FT_BATCH_ATTN_SPLIT) -- tests (GpuBatch*: bitwise
# against the session; the split against the CPU twin), ft-bench-batch at 32 and 2048 prompt tokens, settings
# alternating; the batch GEMV's stage table by tokens (ft-bench-gemv-cuda --batch).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session53/call3.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
source bench/session53/h200_or.sh
R=/tmp/res53c
source bench/device_common.sh
source bench/session53/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4
gpu_tests 120 'GpuBatch*:CudaGemvBatch.*:GpuNvfp4Batch.*'
grep -E "GPU-BATCH" "$R/test.txt" | head -30
log "ft-bench-gemv-cuda --batch"
timeout 60 "$B/ft-bench-gemv-cuda" --batch > "$R/gemv_batch.txt" 2>&1
grep -E "HBM|^\| (batch|slab)" "$R/gemv_batch.txt" | grep -v slab | sed 's/ nvfp4 | q8    |//; s/  */ /g'
models_wait
for round in 1 2; do
  budget 250 "round $round" || break
  bb "new$round" 32 FT_BATCH_SOLO=1
  bb "nosolo$round" 32 FT_BATCH_SOLO=0
  bb "new$round" 2048 FT_BATCH_ATTN_SPLIT=1
  bb "nosplit$round" 2048 FT_BATCH_ATTN_SPLIT=0
done
finish res53c
