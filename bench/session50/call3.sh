#!/usr/bin/env bash
# Session 50 call 3 (~180 s, the budget's rest): on an H200, the lanes kernels beside the tiled ones from HBM and L2
# first (what the H100 cannot show: there HBM holds them); on either card, Llama-8B tg128 FT_NVFP4_LANES=0 / 1
# alternating (eagerly loaded), more rounds for call 2's -0.73% (t -2.1) on the H100.
#   run(command="timeout -s KILL 200 bash bench/session50/call3.sh", carry=[".devcarry/pack"])
R=/tmp/res50c
source bench/device_common.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$R/log.txt"
models_bg llama8b-nvfp4
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  for m in "--pool-gib 1" "--copies 1"; do
    f=$R/direct_$(echo "$m" | tr -d ' -').txt
    log "ft-bench-gemv-cuda --direct $m"
    timeout 40 "$B/ft-bench-gemv-cuda" --direct $m > "$f" 2>&1; echo "rc=$?" >> "$f"
    grep -E "read|rc=|(tiled|lanes|direct).*\| [0-9]" "$f" | grep -vE "direct (ring )?[48]/[234] \|" | cut -c1-100
  done
  finish res50c
fi
models_wait
AB_BUDGET=170 ab_envs 12 "$L" "FT_NVFP4_LANES=0" "FT_NVFP4_LANES=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562 > /dev/null
ab_env_means "$L"
finish res50c
