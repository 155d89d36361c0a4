#!/usr/bin/env bash
# Session 45, call 4: call 3 showed the lazy-loaded placement of the kernels' code moving Llama-8B by up to 2% with
# the same code (ft_probe2, scan off / on: 463.30 / 453.85) -- deterministic per binary and setting, so rounds
# agree and the bias stays. Under CUDA_MODULE_LOADING=EAGER the rounds scatter (453-461) and the settings met
# (458-461). The scan's question asked again under EAGER with more rounds: main off / on, ft_probe2 off / on.
#   PACK_ONLY="ft ft-bigmodel" PACK_EXTRA="/tmp/base/ft_probe2" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session45/call4.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res4
source bench/device_common.sh
ab_preamble llama8b-nvfp4
export CUDA_MODULE_LOADING=EAGER
S="FT_NVFP4_SCAN=1"
AB_BUDGET=230 ab_envs 10 "$L" "-" "$S" "FTBIN=ft_probe2" "FTBIN=ft_probe2 $S" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
log "ft rows:"; cat "$R/ft.md"
finish res4
