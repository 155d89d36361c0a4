#!/usr/bin/env bash
# Session 19, call 10: the fused norm + router + route of a MoE decode layer on one cluster of 16 blocks
# (logits through distributed shared memory instead of a fence and a ticket): the route tests and the
# MoE GPU-vs-CPU tests, then Qwen3-30B-A3B tg128 with it and with FT_MOE_ROUTER_CLUSTER=0, 3 rounds.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 200 bash bench/session19/h200_i.sh; tar czf $OUT/resi.tgz -C /tmp resi",
#       carry=[".devcarry/pack"])
R=/tmp/resi
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
gpu_tests 60 'CudaOpsMoeRoute*:Models/GpuVsCpu.*moe*'
models_wait
AB_BUDGET=150 ab_envs 3 $Q - FT_MOE_ROUTER_CLUSTER=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 170 tokens && same_tokens FT_MOE_ROUTER_CLUSTER $Q 32
finish resi
