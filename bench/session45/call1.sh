#!/usr/bin/env bash
# Session 45, call 1 (session 44's call 4, which found no machine): the scanned NVFP4 scales with Params at 400
# bytes and the scan through a __device__ symbol (main, opt-in FT_NVFP4_SCAN=1) against main without the scan
# ("-"), main before the scan (ft_base, 2523da5) and session 44's probe (ft_nonan: the fix-up compiled out
# everywhere). test_cuda whole first (the new GpuNvfp4Scan session test, launch_mma's instance helper).
#   PACK_ONLY="ft test_cuda ft-bigmodel" PACK_EXTRA="/tmp/base/ft_base /tmp/base/ft_nonan" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session45/call1.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res1
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
log "test_cuda"
gpu_tests 240
models_wait
S="FT_NVFP4_SCAN=1"
tokens_under "$S" "$L"
tokens_under "$S" "$Q"
tokens_under "FTBIN=ft_base" "$L"
tokens_under "FTBIN=ft_nonan" "$L"
FT_NVFP4_SCAN=1 timeout 60 "$B/ft" bench -m "$L" --device cuda -p 0 -n 4 -r 1 2>&1 | grep -E "NaN scale|tiled" | tee -a "$R/log.txt"
AB_BUDGET=440 ab_envs 5 "$L" "FTBIN=ft_base" "$S" "-" "FTBIN=ft_nonan" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
AB_BUDGET=530 ab_envs 3 "$Q" "-" "$S" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$Q"
log "ft rows:"; cat "$R/ft.md"
finish res1
