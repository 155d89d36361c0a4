#!/usr/bin/env bash
# Session 56 on an H200, cut to ~390 s (three refused starts left ~680 s of device time): session 55's h200.sh less its
# test_cuda runs (all 344 passed on an H100 this session, call 1) -- the lanes rule's first H200 run (load log "N
# lane-major"), ft serve's single warm-up, the expert-shape kernels from HBM, Llama-8B tg128 A/B (2 rounds) of the
# default against FT_NVFP4_LANES=0, FT_FFN_L2_AHEAD=16, FT_NVFP4_TILE=all, FT_NORM_FOLD=3, then issue 3's table beside
# llama.cpp v0.5.0's CUDA llama-bench (built in the background from the start).
#   run(command="timeout -s KILL 400 bash bench/session56/try_h200.sh short", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res56h
source bench/device_common.sh
source bench/session51/common.sh
source bench/session55/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
llama_build_bg
ab_preamble llama8b-nvfp4 qwen3moe-30b-nvfp4
timeout 40 "$B/ft" generate --model "$L" --device cuda --prompt-tokens 1,2,3 --max-tokens 2 --temperature 0 2>&1 |
  grep -E "lane-major|warm-up" | cut -c1-160 | tee -a "$R/log.txt"
serve_check
timeout 50 "$B/ft-bench-gemv-cuda" --experts --launches 40 --pool-gib 0.5 > "$R/gemv_experts.txt" 2>&1
grep -E "read|expert|rc=" "$R/gemv_experts.txt" | cut -c1-130 | head -12
snap
AB_BUDGET=225 ab_envs 2 "$L" "-" "FT_NVFP4_LANES=0" "FT_FFN_L2_AHEAD=16" "FT_NVFP4_TILE=all" "FT_NORM_FOLD=3" \
  -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
snap
ft_bench_each 295 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
snap
llama_depth_rows 300 385 $L $Q
finish res56h
