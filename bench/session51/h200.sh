#!/usr/bin/env bash
# Session 51, for an H200 (~460 s, sized to what was left of the session's device time): llama.cpp v0.5.0's CUDA
# llama-bench built in the background; lanes / norm tests; ft-bench-gemv-cuda --direct from HBM (the 80% criterion,
# tiled and lanes); Llama-8B and Qwen3-30B-A3B tg128 with the defaults / FT_NVFP4_LANES=1 / FT_NORM_SPLIT=1
# alternating (eagerly loaded); issue 3's depth table for ft (defaults) -- beside the build, which costs ft ~1.5%
# (session 28) -- then test_cuda (all) until llama.cpp is built, then llama-bench's depth table.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session51/h200.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res51h
source bench/device_common.sh
snap() { tar czf "$OUT/res51h.tgz" -C "$(dirname "$R")" "$(basename "$R")"; }  # what a kill leaves
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
llama_build_bg
gpu_preamble 100 'CudaOpsNorm.*:CudaNvfp4Lanes.*:GpuNvfp4Lanes.*:*Nvfp4Scan.*' llama8b-nvfp4 qwen3moe-30b-nvfp4
f=$R/direct_pool.txt
timeout 70 "$B/ft-bench-gemv-cuda" --direct --pool-gib 1 > "$f" 2>&1; echo "rc=$?" >> "$f"
grep -E "read|rc=|\| [0-9]+x[0-9]+ \| (tiled clean|lanes \(plan\)|tiled clean dep|lanes \(plan\) dep) \|" "$f" | cut -c1-110
tokens_under "FT_NVFP4_LANES=1" "$L"
AB_BUDGET=130 ab_envs 5 "$L" "-" "FT_NVFP4_LANES=1" "FT_NORM_SPLIT=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
AB_BUDGET=175 ab_envs 2 "$Q" "-" "FT_NVFP4_LANES=1" "FT_NORM_SPLIT=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$Q"
snap
ft_bench_each 285 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
snap
log "test_cuda (all, until llama.cpp is built)"
(cd "$B" && timeout $((370 - ($(date +%s) - T0))) ./test_cuda --gtest_brief=1 > "$R/test_all.txt" 2>&1; echo "rc=$?" >> "$R/test_all.txt")
grep -E "tests? ran|PASSED|FAILED|rc=" "$R/test_all.txt" | tail -5
snap
llama_depth_rows 380 450 $L $Q
finish res51h
