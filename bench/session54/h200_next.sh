#!/usr/bin/env bash
# For the next H200 call (~470 s): issue 3's table with session 54's defaults -- lane-major tiles chosen by the
# H200's bandwidth (gemv_tuning.h nvfp4_lanes_default; never yet run on a GPU: the log line "N lane-major" says
# whether the rule chose them), the batch GEMV in one wave. llama.cpp v0.5.0's CUDA llama-bench built in the
# background; the lanes / batch tests; the expert-shape kernels (the 80% criterion's second half, unmeasured on the
# H200 since session 41) and the dense ones from HBM; Llama-8B tg128 default / FT_NVFP4_LANES=0 alternating; issue
# 3's depth table for ft, then test_cuda (all) until llama.cpp is built, then llama-bench's table.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 480 bash bench/session54/h200_next.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res55h
source bench/device_common.sh
source bench/session51/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
llama_build_bg
gpu_preamble 100 'CudaNvfp4Lanes.*:GpuNvfp4Lanes.*:*Nvfp4Scan.*:CudaGemvBatch.*:*GpuBatch*' llama8b-nvfp4 \
  qwen3moe-30b-nvfp4
timeout 40 "$B/ft" generate --model "$L" --device cuda --prompt-tokens 1,2,3 --max-tokens 2 --temperature 0 2>&1 |
  grep -E "lane-major|warm-up" | tee -a "$R/log.txt"
timeout 60 "$B/ft-bench-gemv-cuda" --experts --launches 40 --pool-gib 0.5 > "$R/gemv_experts.txt" 2>&1
grep -E "read|expert|rc=" "$R/gemv_experts.txt" | cut -c1-130 | head -20
timeout 70 "$B/ft-bench-gemv-cuda" --direct --pool-gib 1 > "$R/direct_pool.txt" 2>&1
grep -E "\| [0-9]+x[0-9]+ \| (tiled clean|lanes \(plan\)) \|" "$R/direct_pool.txt" | cut -c1-110
snap
AB_BUDGET=200 ab_envs 4 "$L" "-" "FT_NVFP4_LANES=0" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
ft_bench_each 300 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
snap
log "test_cuda (all, until llama.cpp is built)"
gpu_tests_until 370
snap
llama_depth_rows 380 450 $L $Q
finish res55h
