#!/usr/bin/env bash
# Session 19, call 3: the tiled layout with its rule (qkv / gate|up / down of Llama-8B; nothing of
# Qwen3-30B-A3B): the tiled tests (the session test now bit-exact against row-major) and the GEMV /
# session tests; tg128 on / off.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session19/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 200 'CudaNvfp4Tiled.*:GpuNvfp4Tiled.*:CudaGemv*:Models/GpuVsCpu.*'
grep -E "TILED" "$R/test.txt"
# (the gemv bench: another call; the pack with test_cuda leaves no room for it)
models_wait
AB_BUDGET=430 ab_envs 3 $L - FT_NVFP4_TILE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=470 ab_envs 1 $Q - FT_NVFP4_TILE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
grep -h "stored tiled" "$R/ft.err" | sort | uniq -c
budget 520 tokens && same_tokens FT_NVFP4_TILE $L 32
finish resc
