#!/usr/bin/env bash
# Session 19, call 5: tiled shapes of every k on gemv_mma.cu at 4 warps x 2 stages (call 4's sweep):
# Qwen3-30B-A3B's 5120x2048 qkv tiled now. Tests, then tg128 with and without tiling on both models.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session19/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 200 'CudaNvfp4Tiled.*:GpuNvfp4Tiled.*:CudaGemv*:Models/GpuVsCpu.*'
grep -E "TILED" "$R/test.txt"
models_wait
AB_BUDGET=400 ab_envs 3 $Q - FT_NVFP4_TILE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=470 ab_envs 2 $L - FT_NVFP4_TILE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
grep -h "stored tiled" "$R/ft.err" | sort | uniq -c
budget 520 tokens && same_tokens FT_NVFP4_TILE $Q 32
finish rese
