#!/usr/bin/env bash
# Session 44, call 3: the scanned scales (GemvArgs::scales_clean; cuda/nvfp4_scan.h) -- test_cuda whole, then
# main's binary before it (ft_base, 2523da5) against this one, the same 64 greedy tokens and tg128 alternating
# on Llama-8B and Qwen3-30B-A3B.
#   PACK_ONLY="ft test_cuda ft-bigmodel" PACK_EXTRA=/tmp/base/ft_base scripts/pack-device.sh build-cuda
R=/tmp/res3
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda"
gpu_tests 260
models_wait
tokens_under "FTBIN=ft_base" "$L"
tokens_under "FTBIN=ft_base" "$Q"
AB_BUDGET=420 ab_envs 5 "$L" "FTBIN=ft_base" "-" -- -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=520 ab_envs 3 "$Q" "FTBIN=ft_base" "-" -- -p 0 -n 128 -r 2 --bw-gbs 4562
log "ft rows:"; cat "$R/ft.md"
finish res3
