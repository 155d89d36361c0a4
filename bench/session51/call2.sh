#!/usr/bin/env bash
# Session 51 call 2 (~110 s on an H100): the split FFN norm (FT_NORM_SPLIT=1: the decode norm's row over NV blocks,
# each summing the whole row and making one float4 a thread) and the lanes dequantiser at 2 pieces an iteration.
# Tests, then FT_NORM_SPLIT=0 / FT_NORM_SPLIT=1 / FT_NVFP4_LANES=1 alternating on Llama-8B (pp512 + tg128, eagerly
# loaded), FT_NORM_SPLIT=0 / 1 on Qwen3-30B-A3B. On an H200 also llama.cpp's build and issue 3's depth table
# (as bench/session51/call.sh).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session51/call2.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res51b
source bench/device_common.sh
h200_or_not
gpu_preamble 100 'CudaOpsNorm.*:CudaNvfp4Lanes.*:GpuNvfp4Lanes.*:*Nvfp4Scan.*:GpuMoe*' llama8b-nvfp4 qwen3moe-30b-nvfp4
tokens_under "FT_NORM_SPLIT=1" "$L"
tokens_under "FT_NORM_SPLIT=1" "$Q"
AB_BUDGET=200 ab_envs 6 "$L" "FT_NORM_SPLIT=0" "FT_NORM_SPLIT=1" "FT_NVFP4_LANES=1" -- -p 512 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L" | tee "$R/means_llama.txt"
AB_BUDGET=260 ab_envs 3 "$Q" "FT_NORM_SPLIT=0" "FT_NORM_SPLIT=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$Q" | tee "$R/means_qwen.txt"
if [ $H200 = 1 ]; then
  issue3_tail
fi
finish res51b
