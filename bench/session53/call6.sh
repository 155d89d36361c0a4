#!/usr/bin/env bash
# Session 53 call 6 (~260 s, any GPU; on an H200 session 51's h200.sh instead): main after the two reverts -- test_cuda
# (all), then ft-bench-batch at 32 and 2048 prompt tokens (the batch runner's final rows).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session53/call6.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
source bench/session53/h200_or.sh
R=/tmp/res53g
source bench/device_common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4
log "test_cuda (all)"
gpu_tests_until 215
grep -E "GPU-BATCH.*one-seq|Failure|FAILED" "$R/test_all.txt" | head -20
models_wait
for prompt in 32 2048; do
  log "ft-bench-batch prompt $prompt"
  CUDA_MODULE_LOADING=EAGER timeout 60 "$B/ft-bench-batch" --model "$L" --device cuda --batch 1,2,4,8 \
    --prompt "$prompt" --steps 64 > "$R/batch_$prompt.txt" 2>&1
  grep -E "B=|Session|rror" "$R/batch_$prompt.txt"
done
finish res53g
