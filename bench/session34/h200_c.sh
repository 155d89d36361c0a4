#!/usr/bin/env bash
# Session 34, call 3: the ring kernel's defaults (stages 2, 1 tile before the wait, rope inside) -- its
# tests, then its split plan (FT_ATTN_MMA_PLAN=blocks an SM,key unit; default 2,128) at depth 4096 / 16384,
# and the depth from which one-token steps take it (FT_ATTN_MMA_MIN_KEYS; default 256) at depth 0 / 1024.
R=/tmp/resc
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "ring tests"
gpu_tests 150 'CudaAttention.Mma*:GpuAttentionMma.*'
models_wait
AB_BUDGET=240 ab_envs 2 "$L" - "FT_ATTN_MMA_PLAN=1,128" "FT_ATTN_MMA_PLAN=3,128" "FT_ATTN_MMA_PLAN=2,256" \
  "FT_ATTN_MMA_PLAN=4,64" -- -p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562
AB_BUDGET=330 ab_envs 2 "$L" - "FT_ATTN_MMA_MIN_KEYS=1" "FT_ATTN_MMA_MIN_KEYS=128" -- -p 0 -n 128 -d 0,1024 -r 2 \
  --bw-gbs 4562
AB_BUDGET=500 ab_envs 2 "$Q" - "FT_ATTN_MMA_STAGES=0" "FT_ATTN_MMA_PLAN=1,128" -- -p 0 -n 128 -d 4096,16384 -r 2 \
  --bw-gbs 4562
finish resc
