#!/usr/bin/env bash
# Session 56 on an H200 with less device time than session 55's h200.sh (~480 s) needs; no test_cuda (all 344 passed
# on an H100 this session, call 1). The lanes rule's first H200 run (load log "N lane-major"), ft serve's single
# warm-up, Llama-8B tg128 A/B (2 rounds) of the default against FT_NVFP4_LANES=0, FT_FFN_L2_AHEAD=16,
# FT_NVFP4_TILE=all, FT_NORM_FOLD=3, then both files beside llama.cpp v0.5.0's CUDA llama-bench (built in the
# background from the start).
#   h200_short.sh       ~390 s: also the expert-shape kernels from HBM; issue 3's depth table (d 0, 4096, 16384)
#   h200_short.sh min   ~290 s: tg128 / pp512 at depth 0 only
#   run(command="timeout -s KILL 400 bash bench/session56/try_h200.sh short|min", carry=[".devcarry/pack"], kind="nvidia-h200")
MODE=${1:-short}
R=/tmp/res56$([ "$MODE" = min ] && echo m || echo h)
source bench/device_common.sh
source bench/session51/common.sh
source bench/session55/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) ($MODE)"
llama_build_bg
ab_preamble llama8b-nvfp4 qwen3moe-30b-nvfp4
timeout 40 "$B/ft" generate --model "$L" --device cuda --prompt-tokens 1,2,3 --max-tokens 2 --temperature 0 2>&1 |
  grep -E "lane-major|warm-up" | cut -c1-160 | tee -a "$R/log.txt"
serve_check
if [ "$MODE" != min ]; then
  timeout 50 "$B/ft-bench-gemv-cuda" --experts --launches 40 --pool-gib 0.5 > "$R/gemv_experts.txt" 2>&1
  grep -E "read|expert|rc=" "$R/gemv_experts.txt" | cut -c1-130 | head -12
fi
snap
AB_BUDGET=$([ "$MODE" = min ] && echo 185 || echo 225) ab_envs 2 "$L" "-" "FT_NVFP4_LANES=0" "FT_FFN_L2_AHEAD=16" \
  "FT_NVFP4_TILE=all" "FT_NORM_FOLD=3" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
snap
if [ "$MODE" = min ]; then
  ft_bench_each 235 60 "-p 512 -n 128 -r 2 --bw-gbs 4562" $L $Q
  snap
  llama_wait 262
  llama_bench_rows 285 $L $Q
else
  ft_bench_each 295 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
  snap
  llama_depth_rows 300 385 $L $Q
fi
finish "$(basename "$R")"
