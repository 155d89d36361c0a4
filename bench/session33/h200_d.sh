#!/usr/bin/env bash
# Session 33, call 4: the fold's tickets by acq_rel atomics (no __threadfence by the storers or the reader).
# The fold's tests and the tiled / lean / session tests, then Llama-8B tg128 -p 0 --ctx-size 4096 at
# FT_NORM_FOLD 0 / 2 / 3, 4 rounds alternating, and the tokens under each.
R=/tmp/resd
source bench/device_common.sh
models_bg llama8b-nvfp4
log "test_cuda (the fold's, the tiled, lean and session tests)"
gpu_tests 200 "CudaNormFold.*:GpuNvfp4Tiled.*:CudaNvfp4Tiled.*:*Lean*:GpuSession*:CudaGemv*"
models_wait
for e in FT_NORM_FOLD=0 FT_NORM_FOLD=2; do tokens_under "$e" "$L"; done
ab_envs 4 "$L" FT_NORM_FOLD=0 FT_NORM_FOLD=2 FT_NORM_FOLD=3 -- -p 0 -n 128 -r 2 --ctx-size 4096 --bw-gbs 4562
finish resd
