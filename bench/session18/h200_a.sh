#!/usr/bin/env bash
# Session 18, call 1: decode's L2 prefetch from a side branch (gpu/chain_prefetch.h). Its test and
# the GPU-vs-CPU tests, then tg128 A/B on both models over FT_L2_PREFETCH (mask: 1 forked before
# the projection ahead, 2 after it, 3 both), its byte cap and piece size, alternating; the same
# greedy tokens on and off.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session18/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
gpu_tests 150 'GpuL2Prefetch.*:Models/GpuVsCpu.*'
models_wait
export AB_BUDGET=300
ab_envs 2 $L - FT_L2_PREFETCH=1 FT_L2_PREFETCH=2 FT_L2_PREFETCH=3 "FT_L2_PREFETCH=1 FT_L2_PREFETCH_MB=12" \
  "FT_L2_PREFETCH=3 FT_L2_PREFETCH_MB=64" "FT_L2_PREFETCH=1 FT_L2_PREFETCH_KB=8" -- -p 0 -n 128 -r 1 --bw-gbs 4562
export AB_BUDGET=520
ab_envs 2 $Q - FT_L2_PREFETCH=1 FT_L2_PREFETCH=2 FT_L2_PREFETCH=3 "FT_L2_PREFETCH=1 FT_L2_PREFETCH_KB=8" \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 560 "tokens" && same_tokens FT_L2_PREFETCH $L 32
finish resa
