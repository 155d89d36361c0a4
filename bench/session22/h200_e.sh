#!/usr/bin/env bash
# Session 22, call 5: call 4's changes undone (its noinline instances and warm-up lost the fast route's gain);
# the fast route as in call 2 against the same with sorted rounds (FT_MOE_ROUTE_FAST=2) and with the router's
# logits written N times, each gate|up CTA routing copy c % N (FT_MOE_ROUTE_COPIES: an L2 hot spot?); the exact
# rounds and no routing as references. Qwen3-30B-A3B tg128 alternating, tests, tokens.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session22/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
gpu_tests 150 'CudaOpsMoeRoute.*:CudaGemvLean.*:Models/GpuVsCpu.*:CudaMoe*'
models_wait
AB_BUDGET=290 ab_envs 3 $Q - FT_MOE_ROUTE_FAST=2 FT_MOE_ROUTE_COPIES=8 FT_MOE_ROUTE_COPIES=32 FT_MOE_ROUTE_FAST=0 \
  FT_DEBUG_SKIP=route -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 320 tokens && same_tokens FT_MOE_ROUTE_FAST $Q 64
finish rese
