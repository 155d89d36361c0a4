#!/usr/bin/env bash
# Session 30 call 2 (main with call 1's winners as defaults: the tiled GEMV's m16n8k32, the lean dense
# launches at 6 blocks an SM): the GEMV / tiled / lean / GPU-vs-CPU tests; 64 tokens under the old bound;
# tg128 alternating, 3 rounds: the dense bound 4 (before) / 8 against 6, and the down projection's
# warps x stages (4096x14336, now 8,3) again under m16n8k32.
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests: GEMV, tiled, lean, GPU vs CPU"
gpu_tests 120 'CudaGemv*:*Tiled*:*GpuVsCpu*:*Nvfp4*:*Lean*'
models_wait
tokens_under FT_GEMV_NVFP4_DENSE_PLAN=2,0,4 $L
tokens_under FT_GEMV_NVFP4_DENSE_PLAN=1,0,4 $Q
AB_BUDGET=260 ab_envs 3 $L - FT_GEMV_NVFP4_DENSE_PLAN=2,0,4 FT_GEMV_NVFP4_DENSE_PLAN=2,0,8 \
  FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,4 FT_GEMV_NVFP4_TILED_PLAN=4096x14336=4,2 \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=330 ab_envs 3 $Q - FT_GEMV_NVFP4_DENSE_PLAN=1,0,4 FT_GEMV_NVFP4_DENSE_PLAN=1,0,8 \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resa
