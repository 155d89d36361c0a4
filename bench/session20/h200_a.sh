#!/usr/bin/env bash
# Session 20, call 1: session 19's review commits (never run on the device: the tiled / GEMV tests) and the
# dedicated decode attention's keys staged in shared memory before the PDL wait (FT_ATTN_STAGE_KEYS):
# tests, then tg128 on both models at 0 / 64 / 128 staged keys, alternating, and the greedy tokens on / off.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 420 bash bench/session20/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 150 'CudaNvfp4Tiled.*:GpuNvfp4Tiled.*:CudaGemv*:CudaAttention*:Models/GpuVsCpu.*'
models_wait
AB_BUDGET=250 ab_envs 2 $L FT_ATTN_STAGE_KEYS=0 - FT_ATTN_STAGE_KEYS=64 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=370 ab_envs 2 $Q FT_ATTN_STAGE_KEYS=0 - FT_ATTN_STAGE_KEYS=64 -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 390 tokens && same_tokens FT_ATTN_STAGE_KEYS $L 32
finish resa
