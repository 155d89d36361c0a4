#!/usr/bin/env bash
# Session 22, call 7 (after the final call, the last of the device budget): the fast route with its softmax sum
# interleaved with its rounds and its weight sum unrolled (FT_MOE_ROUTE_FAST=2) against the fast route as it
# is: routing tests (mode 4 bit for bit against the block route), Qwen3-30B-A3B tg128 alternating.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 180 bash bench/session22/h200_g.sh; tar czf $OUT/resg.tgz -C /tmp resg",
#       carry=[".devcarry/pack"])
R=/tmp/resg
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
gpu_tests 60 'CudaOpsMoeRoute.*:CudaGemvLean.Routing*'
models_wait
AB_BUDGET=150 ab_envs 4 $Q - FT_MOE_ROUTE_FAST=2 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resg
