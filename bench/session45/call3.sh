#!/usr/bin/env bash
# Session 45, call 3: call 2 had ft_probe2 (the check compiled out: its clean and checked instances are the same
# code) 2.1% slower with FT_NVFP4_SCAN=1 than without -- the same code, other functions. Placement? CUDA loads a
# module's functions lazily (CUDA_MODULE_LOADING=LAZY, the default since 12.2), where the first launch (graph
# capture) puts them; EAGER loads the whole module at start. Main (ft) and ft_probe2, the scan off and on, each
# LAZY (the default) and EAGER, alternating.
#   PACK_ONLY="ft ft-bigmodel" PACK_EXTRA="/tmp/base/ft_probe2" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session45/call3.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res3
source bench/device_common.sh
ab_preamble llama8b-nvfp4
S="FT_NVFP4_SCAN=1" E="CUDA_MODULE_LOADING=EAGER"
tokens_under "$E" "$L"
AB_BUDGET=200 ab_envs 4 "$L" "-" "$S" "$E" "$E $S" "FTBIN=ft_probe2" "FTBIN=ft_probe2 $S" "FTBIN=ft_probe2 $E" \
  "FTBIN=ft_probe2 $E $S" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
log "ft rows:"; cat "$R/ft.md"
finish res3
