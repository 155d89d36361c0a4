#!/usr/bin/env bash
# Session 55 on an H200 (~480 s; call1.sh execs it there): the lanes rule's first GPU run (the load log's "N
# lane-major"), ft serve's single warm-up, the expert-shape kernels from HBM (the 80% criterion's second half,
# unmeasured on the H200 since session 41), Llama-8B tg128 A/B of the knobs tuned on the H100 or before the lanes:
# the default (lanes, wo's 8 MB L2 ahead, gate|up 4 warps x 2 stages, down 8 x 4, wo on the lean slab, the FFN norm
# as a launch) against FT_NVFP4_LANES=0, FT_FFN_L2_AHEAD=16 / =0, gate|up at 3 stages (two loaded under the FFN
# norm), down at 3 stages (9.58 against 9.68 us alone, session 54), wo tiled lane-major (FT_NVFP4_TILE=all: another
# sum order), the FFN norm folded (FT_NORM_FOLD=3) -- then issue 3's table (ft, then llama.cpp v0.5.0's CUDA
# llama-bench built in the background) with test_cuda (all) while it builds.
#   run(command="timeout -s KILL 560 bash bench/session55/call1.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res55h
source bench/device_common.sh
source bench/session51/common.sh
source bench/session55/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
llama_build_bg
gpu_preamble 100 'CudaNvfp4Lanes.*:GpuNvfp4Lanes.*:*Nvfp4Scan.*:CudaGemvBatch.*' llama8b-nvfp4 qwen3moe-30b-nvfp4
timeout 40 "$B/ft" generate --model "$L" --device cuda --prompt-tokens 1,2,3 --max-tokens 2 --temperature 0 2>&1 |
  grep -E "lane-major|warm-up" | cut -c1-160 | tee -a "$R/log.txt"
serve_check
timeout 60 "$B/ft-bench-gemv-cuda" --experts --launches 40 --pool-gib 0.5 > "$R/gemv_experts.txt" 2>&1
grep -E "read|expert|rc=" "$R/gemv_experts.txt" | cut -c1-130 | head -12
snap
AB_BUDGET=300 ab_envs 3 "$L" "-" "FT_NVFP4_LANES=0" "FT_FFN_L2_AHEAD=16" "FT_FFN_L2_AHEAD=0" \
  "FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,3" "FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,3" "FT_NVFP4_TILE=all" \
  "FT_NORM_FOLD=3" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
ft_bench_each 350 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
snap
log "test_cuda (all, until llama.cpp is built)"
gpu_tests_until 390
llama_depth_rows 400 480 $L $Q
finish res55h
