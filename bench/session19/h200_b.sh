#!/usr/bin/env bash
# Session 19, call 2: the tiled NVFP4 layout for real (cuda/nvfp4_tiled.h; branch wip/tiled): the
# tiled tests and the GEMV / session tests, then tg128 with it (default) and without
# (FT_NVFP4_TILE=0) alternating on both models, pp512 once each, and the greedy tokens on / off.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session19/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 200 'CudaNvfp4Tiled.*:GpuNvfp4Tiled.*:CudaGemv*:Models/GpuVsCpu.*'
grep -E "TILED" "$R/test.txt"
models_wait
AB_BUDGET=420 ab_envs 3 $L - FT_NVFP4_TILE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=470 ab_envs 2 $Q - FT_NVFP4_TILE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=510 ab_envs 1 $L - FT_NVFP4_TILE=0 -- -p 512 -n 0 -r 1 --bw-gbs 4562
budget 530 tokens && same_tokens FT_NVFP4_TILE $L 32
finish resb
