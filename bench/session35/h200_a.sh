#!/usr/bin/env bash
# Session 35, call 1: two 16-row tiles a CTA in the tiled GEMV (Llama-8B's gate|up in one wave), and a least
# chunk of 256 keys in the tensor-core decode attention's plan -- the tests of both, the kernel alone, tg128.
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
gpu_tests 150 'CudaAttention.Mma*:CudaAttention.*Rope*:GpuAttentionMma.*:CudaNvfp4Tiled.*'
log "ft-bench-gemv-cuda --tiled --no-sweep"
timeout 60 "$B/ft-bench-gemv-cuda" --tiled --no-sweep --pool-gib 1 > "$R/tiled.txt" 2>&1; echo "rc=$?" >> "$R/tiled.txt"
grep -E "^\| tiled|rc=" "$R/tiled.txt"
models_wait
TPC="FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,2,0,2"
tokens_under "$TPC" $L
AB_BUDGET=330 ab_envs 3 "$L" - "$TPC" -- -p 0 -n 128 -r 2 --bw-gbs 4562
MC="FT_ATTN_MMA_PLAN=2,128,256"
AB_BUDGET=520 ab_envs 1 "$L" - "$MC" -- -p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562
AB_BUDGET=560 ab_envs 1 "$Q" - "$MC" -- -p 0 -n 128 -d 4096 -r 2 --bw-gbs 4562
finish resa
