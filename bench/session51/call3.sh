#!/usr/bin/env bash
# Session 51 call 3 (~150 s on an H100): tests after the slab's 32-bit lanes gather and the dequantiser back at one
# piece; ft-bench-gemv-cuda --direct from L2 (the prototype's shared prologue / epilogue); FT_NORM_SPLIT=0 / 1
# alternating, tg128 only, Llama-8B 8 rounds and Qwen3-30B-A3B 6. On an H200 also issue 3's depth table beside
# llama.cpp (as bench/session51/call.sh).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session51/call3.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res51c
source bench/device_common.sh
h200_or_not
gpu_preamble 100 'CudaOpsNorm.*:CudaNvfp4Lanes.*:GpuNvfp4Lanes.*:CudaNvfp4Tiled.*' llama8b-nvfp4 qwen3moe-30b-nvfp4
f=$R/direct_copies1.txt
timeout 70 "$B/ft-bench-gemv-cuda" --direct --copies 1 > "$f" 2>&1; echo "rc=$?" >> "$f"
grep -E "read|rc=|\| [0-9]+x[0-9]+ \| (tiled clean|lanes \(plan\)|direct)" "$f" | cut -c1-110 | head -24
AB_BUDGET=150 ab_envs 8 "$L" "FT_NORM_SPLIT=0" "FT_NORM_SPLIT=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
AB_BUDGET=220 ab_envs 6 "$Q" "FT_NORM_SPLIT=0" "FT_NORM_SPLIT=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$Q"
if [ $H200 = 1 ]; then
  issue3_tail
fi
finish res51c
