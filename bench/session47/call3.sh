#!/usr/bin/env bash
# Session 47, call 3: the FFN norm by wo's last CTA again, now without the early PDL trigger in its instances (the
# last CTA triggers after its norm, the others by exiting; calls 1-2: with every CTA triggering early, gate|up's
# CTAs flooded the memory system under the last CTA's tail, -11.9%). Its tests, the 64 greedy tokens, Llama-8B tg128
# alternating with main's default, then chain traces of both (trace build packed as ft_trace).
#   cmake --build build-cuda -j2 --target ft test_cuda; cmake --build build-trace -j2 --target ft; cp build-trace/ft /tmp/ft_trace
#   PACK_ONLY="ft test_cuda ft-bigmodel" PACK_EXTRA=/tmp/ft_trace scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 500 bash bench/session47/call3.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res3
source bench/device_common.sh
gpu_preamble 90 'CudaNormCta.*:GpuNvfp4Tiled.*' llama8b-nvfp4
tokens_under "FT_NORM_CTA=1" "$L"
AB_BUDGET=330 ab_envs 10 "$L" "-" "FT_NORM_CTA=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
AB_BUDGET=420 ab_envs 1 "$L" "FTBIN=ft_trace FT_CHAIN_TRACE=$R/base" "FTBIN=ft_trace FT_CHAIN_TRACE=$R/cta FT_NORM_CTA=1" \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
chain_sums base cta
log "ft rows:"; cat "$R/ft.md"
finish res3
