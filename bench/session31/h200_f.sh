#!/usr/bin/env bash
# Session 31, call 9: call 8's chain traces put the 3.7 us a layer lost without the attention norm in the qkv GEMV
# (10.40 us from the down projection's end to its own, against 5.47 after the norm): released under the down
# projection, are its 384 blocks packed onto the first SMs that free up (8 an SM fit) instead of spread 3 an SM as
# on an idle GPU? FT_GEMV_NVFP4_TILED_PLAN="6144x4096=0,0,73728" gives the qkv launch 72 KB of shared memory a
# block: 3 an SM at most (57344: 4).
# Llama-8B tg128 -p 0 --ctx-size 4096, 2 rounds alternating.
R=/tmp/resf2
source bench/device_common.sh
models_bg llama8b-nvfp4
models_wait
ab_envs 2 "$L" - FT_DEBUG_SKIP=norm1 "FT_DEBUG_SKIP=norm1 FT_GEMV_NVFP4_TILED_PLAN=6144x4096=0,0,73728" FT_GEMV_NVFP4_TILED_PLAN=6144x4096=0,0,73728 \
  "FT_DEBUG_SKIP=norm1 FT_GEMV_NVFP4_TILED_PLAN=6144x4096=0,0,57344" -- -p 0 -n 128 -r 2 --ctx-size 4096 --bw-gbs 4562
finish resf2
