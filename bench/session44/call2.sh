#!/usr/bin/env bash
# Session 44, call 2: the potential of the tensor-core GEMVs without the UE4M3 NaN check in their step loop
# (nvfp4_scales2's branch: ~12 instructions and a BSSY/BSYNC pair a scale word, 4 scale words a step). A probe:
# ft_nonan / ft-bench-gemv-cuda_nonan were built with `#define FT_PROBE_NO_NAN 1` at the top of
# cuda/gemv_q8_formats.cuh (wrong only for scale bytes 0x7F / 0xFF, which the synthetic models lack); the _base
# binaries are main's (2523da5). The kernel alone with its weights in L2 (--pool-gib 0.001: instruction bound, the
# H200's regime) and from HBM, then Llama-8B tg128 alternating.
#   PACK_ONLY="ft-bigmodel" PACK_EXTRA="/tmp/base/ft_base /tmp/base/ft_nonan /tmp/base/ft-bench-gemv-cuda_base
#     /tmp/base/ft-bench-gemv-cuda_nonan" scripts/pack-device.sh build-cuda
R=/tmp/res2
source bench/device_common.sh
ln -sf ft_base "$B/ft"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4
for v in base nonan base nonan; do
  log "gemv L2-resident $v"
  timeout 120 "$B/ft-bench-gemv-cuda_$v" --tiled --no-sweep --pool-gib 0.001 > "$R/gemv_l2_$v.txt" 2>&1
  grep -E "x4096|x14336" "$R/gemv_l2_$v.txt" | head -20
done
for v in base nonan; do
  log "gemv HBM $v"
  timeout 120 "$B/ft-bench-gemv-cuda_$v" --tiled --no-sweep > "$R/gemv_hbm_$v.txt" 2>&1
  grep -E "x4096|x14336" "$R/gemv_hbm_$v.txt" | head -20
done
models_wait
tokens_under "FTBIN=ft_nonan" "$L"
AB_BUDGET=500 ab_envs 6 "$L" "FTBIN=ft_base" "FTBIN=ft_nonan" -- -p 0 -n 128 -r 2 --bw-gbs 4562
log "ft rows:"; cat "$R/ft.md"
finish res2
