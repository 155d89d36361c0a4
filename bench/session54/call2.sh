#!/usr/bin/env bash
# Session 54 call 2 (~200 s, any GPU; on an H200 session 51's h200.sh instead): the batch tensor-core GEMV in one wave
# of CTAs that walk the tiles (the activations' fragments built once a CTA, 8 a batch) against a CTA a tile
# (FT_GEMV_NVFP4_BATCH_WAVE=0) -- its tests, kernel times (ft-bench-gemv-cuda --batch), and the GPU batch runner's
# steps (ft-bench-batch, Llama-8B, prompt 32, alternating, 2 rounds).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session54/call2.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
source bench/session53/h200_or.sh
R=/tmp/res54b
source bench/device_common.sh
source bench/session53/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4
log "tests: batch kernel, lanes, batch sessions"
gpu_tests 200 'CudaGemvBatch.*:CudaNvfp4Lanes.*:GpuNvfp4Batch.*:GpuNvfp4Lanes.*:*GpuBatch*'
for wave in 1 0; do
  log "ft-bench-gemv-cuda --batch FT_GEMV_NVFP4_BATCH_WAVE=$wave"
  FT_GEMV_NVFP4_BATCH_WAVE=$wave timeout 120 "$B/ft-bench-gemv-cuda" --batch > "$R/gemv_batch_$wave.txt" 2>&1
  grep -E "HBM|^\| batch" "$R/gemv_batch_$wave.txt"
done
models_wait
for round in 1 2; do
  for wave in 1 0; do
    budget 400 "round $round wave $wave" || break
    bb "wave${wave}_$round" 32 FT_GEMV_NVFP4_BATCH_WAVE=$wave
  done
done
finish res54b
