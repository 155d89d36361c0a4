#!/usr/bin/env bash
# Session 53 call 5 (~320 s, any GPU; on an H200 session 51's h200.sh instead): the batch GEMV's SwiGLU tail (a
# batched step's gate|up + SwiGLU in one launch) and the batch attention's rope inside (FT_ATTN_ROPE) -- test_cuda (all: the decode attention's ticket moved to
# cuda/ticket.cuh, the session's short chunks take the tail too), ft-bench-batch at 32 and 2048 prompt tokens with
# default / FT_GLU_FUSED=0 / FT_ATTN_ROPE=0 alternating; a lone sequence's prompt through the session's prefill (FT_BATCH_SOLO=1 / 0,
# 2048-token prompts: ft-bench-batch's "prompts" column).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session53/call5.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
source bench/session53/h200_or.sh
R=/tmp/res53f
source bench/device_common.sh
source bench/session53/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4
gpu_tests 90 'CudaGemvBatch.*:*GpuBatch*'
grep -E "GPU-BATCH.*one-seq|Failure|FAILED" "$R/test.txt" | head -20
models_wait
for round in 1 2; do
  budget 170 "round $round" || break
  bb "def$round" 32 FT_GLU_FUSED=1
  bb "noglu$round" 32 FT_GLU_FUSED=0
  bb "norope$round" 32 FT_ATTN_ROPE=0
done
bb solo 2048 FT_BATCH_SOLO=1
bb nosolo 2048 FT_BATCH_SOLO=0
log "test_cuda (all)"
gpu_tests_until 440
finish res53f
