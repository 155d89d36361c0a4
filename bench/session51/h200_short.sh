#!/usr/bin/env bash
# Session 51, for an H200 when too little device time is left for llama.cpp's build (~230 s): h200.sh without the
# build, the full test suite and llama-bench -- ft's figures only (llama.cpp's H200 figures: session 41's).
#   run(command="timeout -s KILL 260 bash bench/session51/h200_short.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res51s
source bench/device_common.sh
snap() { tar czf "$OUT/res51s.tgz" -C "$(dirname "$R")" "$(basename "$R")"; }  # what a kill leaves
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
gpu_preamble 100 'CudaOpsNorm.*:CudaNvfp4Lanes.*:GpuNvfp4Lanes.*:*Nvfp4Scan.*' llama8b-nvfp4 qwen3moe-30b-nvfp4
f=$R/direct_pool.txt
timeout 70 "$B/ft-bench-gemv-cuda" --direct --pool-gib 1 > "$f" 2>&1; echo "rc=$?" >> "$f"
grep -E "read|rc=|\| [0-9]+x[0-9]+ \| (tiled clean|lanes \(plan\)|tiled clean dep|lanes \(plan\) dep) \|" "$f" | cut -c1-110
tokens_under "FT_NVFP4_LANES=1" "$L"
AB_BUDGET=120 ab_envs 5 "$L" "-" "FT_NVFP4_LANES=1" "FT_NORM_SPLIT=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
AB_BUDGET=160 ab_envs 2 "$Q" "-" "FT_NVFP4_LANES=1" "FT_NORM_SPLIT=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$Q"
snap
ft_bench_each 245 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
snap
finish res51s
