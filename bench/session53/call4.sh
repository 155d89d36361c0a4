#!/usr/bin/env bash
# Session 53 call 4 (~120 s, any GPU; on an H200 session 51's h200.sh instead): the batch attention launched with PDL
# and writing wo's Q8 row, no gather before the head on decode-only steps -- tests (*GpuBatch*), ft-bench-batch at 32
# and 2048 prompt tokens (call 3's rows are the baseline: same bench, an H100).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session53/call4.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
source bench/session53/h200_or.sh
R=/tmp/res53e
source bench/device_common.sh
source bench/session53/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4
gpu_tests 120 '*GpuBatch*'
grep -E "GPU-BATCH.*(one-seq|up to)|Failure|FAILED" "$R/test.txt" | head -30
models_wait
for round in 1 2; do
  budget 200 "round $round" || break
  bb "r$round" 32 FT_BATCH_SOLO=1
  bb "r$round" 2048 FT_BATCH_SOLO=1
done
finish res53e
