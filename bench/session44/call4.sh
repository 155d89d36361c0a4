#!/usr/bin/env bash
# Session 44, call 4: call 3 had the scanned-scales build 0.8% slower than main on Llama-8B where call 2's probe
# (the same kernels' PTX, the check dropped everywhere) was 1.5% faster. Differences left: Params grew 400 -> 408
# bytes (scales_clean after after_gemv shifted every later field) and the scan's cudaMalloc / cudaFree at load.
# This build keeps Params at 400 bytes (scales_clean in glu_order's padding) and scans with a __device__ symbol.
# ft_base = main before (2523da5), ft_nonan = call 2's probe, ft = this build; Llama-8B and Qwen3-30B-A3B tg128
# alternating, the same 64 greedy tokens.
#   PACK_ONLY="ft ft-bigmodel" PACK_EXTRA="/tmp/base/ft_base /tmp/base/ft_nonan" scripts/pack-device.sh build-cuda
R=/tmp/res4
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
tokens_under "FTBIN=ft_base" "$L"
tokens_under "FTBIN=ft_base" "$Q"
AB_BUDGET=200 ab_envs 4 "$L" "FTBIN=ft_base" "-" "FTBIN=ft_nonan" -- -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=250 ab_envs 2 "$Q" "FTBIN=ft_base" "-" -- -p 0 -n 128 -r 2 --bw-gbs 4562
log "ft rows:"; cat "$R/ft.md"
finish res4
