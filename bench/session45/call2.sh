#!/usr/bin/env bash
# Session 45, call 2: call 1 had main's scanned build (FT_NVFP4_SCAN=1) 0.9% slower than unscanned on Llama-8B while
# session 44's probe (no fix-up anywhere) was 1.1% faster, and the clean instances' PTX equals the probe's kernel for
# kernel (bench/ptx_same.py entries: all 35 + 12). Two questions:
#  - Is it code placement? ft_probe2 = main with `#define FT_PROBE_NO_NAN 1` (nvfp4_scales2 unchecked in every
#    instance): there FT_NVFP4_SCAN=1 switches between instances whose code is the same, at other addresses.
#  - Which launches move? The chain trace (ft_trace: main built with -DFT_CHAIN_TRACE=ON) with the scan off and on.
#   PACK_ONLY="ft ft-bigmodel" PACK_EXTRA="/tmp/base/ft_probe2 /tmp/base/ft_trace" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session45/call2.sh", carry=[".devcarry/pack"], kind="nvidia-h100-x1")
R=/tmp/res2
source bench/device_common.sh
ab_preamble llama8b-nvfp4
S="FT_NVFP4_SCAN=1"
tokens_under "FTBIN=ft_probe2" "$L"
tokens_under "FTBIN=ft_probe2 $S" "$L"
AB_BUDGET=200 ab_envs 5 "$L" "-" "$S" "FTBIN=ft_probe2" "FTBIN=ft_probe2 $S" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
AB_BUDGET=300 ab_envs 2 "$L" "FTBIN=ft_trace FT_CHAIN_TRACE=$R/off" "FTBIN=ft_trace $S FT_CHAIN_TRACE=$R/on" \
  -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
chain_sums off on
log "ft rows:"; cat "$R/ft.md"
finish res2
