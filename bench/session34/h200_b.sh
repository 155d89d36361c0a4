#!/usr/bin/env bash
# Session 34, call 2: why the K/V ring (stages 2) lost to one register tile (stages 0) at depth 4096 once
# the rope moved inside (call 1): tiles issued before the PDL wait (FT_ATTN_MMA_PRE=1: one, the rest
# right after the wait) and a shared-memory carveout for the kernel (FT_ATTN_MMA_CARVEOUT=100); every
# setting with the rope inside. The ring tests with PRE=1 first.
R=/tmp/resb
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "ring tests with FT_ATTN_MMA_PRE=1"
FT_ATTN_MMA_PRE=1 gpu_tests 120 'CudaAttention.Mma*:GpuAttentionMma.*'
models_wait
AB_BUDGET=330 ab_envs 2 "$L" "FT_ATTN_MMA_STAGES=0" "FT_ATTN_MMA_STAGES=2 FT_ATTN_MMA_PRE=1" \
  "FT_ATTN_MMA_STAGES=3 FT_ATTN_MMA_PRE=1" "FT_ATTN_MMA_STAGES=3" "FT_ATTN_MMA_STAGES=3 FT_ATTN_MMA_CARVEOUT=100" \
  "FT_ATTN_MMA_STAGES=2 FT_ATTN_MMA_CARVEOUT=100" -- -p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562
AB_BUDGET=520 ab_envs 2 "$Q" "FT_ATTN_MMA_STAGES=0" "FT_ATTN_MMA_STAGES=3 FT_ATTN_MMA_PRE=1" "FT_ATTN_MMA_STAGES=3" -- \
  -p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562
finish resb
