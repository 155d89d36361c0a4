#!/usr/bin/env bash
# Session 30 call 3 (main with calls 1-2's defaults: m16n8k32, the lean dense bound 8, the down
# projection at 8 warps x 4 stages): 64 tokens against the session-29 plan; tg128 alternating, 3 rounds:
# against that plan, and Llama-8B's qkv / gate|up at 3 and 4 stages under m16n8k32.
R=/tmp/resb
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
OLD="FT_GEMV_NVFP4_DENSE_PLAN=2,0,4 FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,3"
tokens_under "$OLD" $L
tokens_under FT_GEMV_NVFP4_DENSE_PLAN=1,0,4 $Q
AB_BUDGET=150 ab_envs 3 $L - "$OLD" FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,3 FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,4 \
  FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,3 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=185 ab_envs 3 $Q - FT_GEMV_NVFP4_DENSE_PLAN=1,0,4 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resb
