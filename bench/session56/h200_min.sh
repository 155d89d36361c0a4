#!/usr/bin/env bash
# Session 56 on an H200 with ~300 s left to the session (four refused starts): the lanes rule's first H200 run, ft serve's
# single warm-up, Llama-8B tg128 A/B (2 rounds) of the default against FT_NVFP4_LANES=0, FT_FFN_L2_AHEAD=16,
# FT_NVFP4_TILE=all, FT_NORM_FOLD=3, then tg128 / pp512 of both files beside llama.cpp v0.5.0's CUDA llama-bench (built
# in the background from the start; Llama-8B first, depth 0 only).
#   run(command="timeout -s KILL 300 bash bench/session56/try_h200.sh min", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res56m
source bench/device_common.sh
source bench/session51/common.sh
source bench/session55/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
llama_build_bg
ab_preamble llama8b-nvfp4 qwen3moe-30b-nvfp4
timeout 40 "$B/ft" generate --model "$L" --device cuda --prompt-tokens 1,2,3 --max-tokens 2 --temperature 0 2>&1 |
  grep -E "lane-major|warm-up" | cut -c1-160 | tee -a "$R/log.txt"
serve_check
snap
AB_BUDGET=185 ab_envs 2 "$L" "-" "FT_NVFP4_LANES=0" "FT_FFN_L2_AHEAD=16" "FT_NVFP4_TILE=all" "FT_NORM_FOLD=3" \
  -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
snap
ft_bench_each 235 60 "-p 512 -n 128 -r 2 --bw-gbs 4562" $L $Q
snap
llama_wait 262
for f in $L $Q; do
  budget 285 "llama-bench $f" || break
  timeout 25 "$LB" -m "$f" -p 512 -n 128 -ngl 99 -fa 1 -r 2 -o md 2>>"$R/lb.err" | tee -a "$R/lb_raw.md" | rows |
    tee -a "$R/llama-bench.md"
done
finish res56m
