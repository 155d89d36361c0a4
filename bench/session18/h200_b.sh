#!/usr/bin/env bash
# Session 18, call 2: the L2 prefetch of a MoE layer's chosen experts (FT_L2_PREFETCH bits 4: down,
# 8: gate and up; forked after the routing), with and without the dense qkv / wo bit 1, on
# Qwen3-30B-A3B, alternating; the prefetch test; the same greedy tokens on and off.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session18/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
log "tests"
gpu_tests 100 'GpuL2Prefetch.*:Models/GpuVsCpu.*qwen3moe*'
models_wait
export AB_BUDGET=420
ab_envs 3 $Q - FT_L2_PREFETCH=1 FT_L2_PREFETCH=4 FT_L2_PREFETCH=5 FT_L2_PREFETCH=12 FT_L2_PREFETCH=13 \
  "FT_L2_PREFETCH=5 FT_L2_PREFETCH_KB=8" "FT_L2_PREFETCH=4 FT_L2_PREFETCH_KB=8" -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 470 "tokens" && same_tokens FT_L2_PREFETCH $Q 32
finish resb
