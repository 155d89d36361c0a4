#!/usr/bin/env bash
# Session 55 on an H200 (~480 s; call1.sh execs it there): the lanes rule's first GPU run (the load log's "N
# lane-major"), ft serve's single warm-up, the expert-shape kernels from HBM (the 80% criterion's second half,
# unmeasured on the H200 since session 41), Llama-8B tg128 A/B of settings tuned on the H100 only -- the default
# (lanes, wo's 8 MB L2 ahead) against FT_NVFP4_LANES=0, FT_FFN_L2_AHEAD=16 and =0 -- then issue 3's table (ft, then
# llama.cpp v0.5.0's CUDA llama-bench built in the background) with test_cuda (all) while it builds.
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
AB_BUDGET=270 ab_envs 4 "$L" "-" "FT_NVFP4_LANES=0" "FT_FFN_L2_AHEAD=16" "FT_FFN_L2_AHEAD=0" -- -p 0 -n 128 -r 2 \
  --bw-gbs 4562
ab_env_means "$L"
ft_bench_each 330 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
snap
log "test_cuda (all, until llama.cpp is built)"
gpu_tests_until 380
llama_depth_rows 390 470 $L $Q
finish res55h
