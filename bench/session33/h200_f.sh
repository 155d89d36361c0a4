#!/usr/bin/env bash
# Session 33, call 8: the review mends (the fold's Q8 by q8_quantize_warp<RAW>, helpers): the fold's, tiled,
# lean, GEMV and session tests, and Llama-8B tg128 at FT_NORM_FOLD 0 / 2, 2 rounds alternating.
R=/tmp/resg
source bench/device_common.sh
models_bg llama8b-nvfp4
gpu_tests 200 "CudaNormFold.*:GpuNvfp4Tiled.*:CudaNvfp4Tiled.*:*Lean*:GpuSession*:CudaGemv*:*Swiglu*:*Q8*"
models_wait
tokens_under FT_NORM_FOLD=0 "$L"
AB_BUDGET=250 ab_envs 2 "$L" FT_NORM_FOLD=0 - -- -p 0 -n 128 -r 2 --ctx-size 4096 --bw-gbs 4562
finish resg
