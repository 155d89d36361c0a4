#!/usr/bin/env bash
# Session 22, call 2: the fast warp route (moe_route_warp.cuh route_row_warp_fast; FT_MOE_ROUTE_FAST=0 the
# exact rounds only): the routing tests (modes block / fast / exact / fast-only, near ties), the lean routing
# and GPU-vs-CPU tests; Qwen3-30B-A3B tg128 fast / exact / no routing at all (FT_DEBUG_SKIP=route, the bound),
# alternating; the greedy tokens fast vs exact.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session22/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
gpu_tests 150 'CudaOpsMoeRoute.*:CudaGemvLean.*:Models/GpuVsCpu.*:CudaMoe*'
models_wait
AB_BUDGET=260 ab_envs 3 $Q - FT_MOE_ROUTE_FAST=0 FT_DEBUG_SKIP=route -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 300 tokens && same_tokens FT_MOE_ROUTE_FAST $Q 64
finish resb
