#!/usr/bin/env bash
# Session 22, call 4: the fast route's rounds on per-lane sorted keys, its instances out of line, and the
# warm-up run before the PDL wait (FT_MOE_ROUTE_WARM=0 off): the routing tests; Qwen3-30B-A3B tg128 default /
# no warm-up / exact rounds (FT_MOE_ROUTE_FAST=0) / no routing (FT_DEBUG_SKIP=route), alternating; tokens.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session22/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
gpu_tests 150 'CudaOpsMoeRoute.*:CudaGemvLean.*:Models/GpuVsCpu.*:CudaMoe*'
models_wait
AB_BUDGET=270 ab_envs 3 $Q - FT_MOE_ROUTE_WARM=0 FT_MOE_ROUTE_FAST=0 FT_DEBUG_SKIP=route -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 300 tokens && same_tokens FT_MOE_ROUTE_FAST $Q 64
budget 320 tokens && same_tokens FT_MOE_ROUTE_WARM $Q 64
finish resd
