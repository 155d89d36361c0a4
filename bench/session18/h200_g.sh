#!/usr/bin/env bash
# Session 18, call 7: does the MoE layers' L2 prefetch (default on) cost Qwen3-30B-A3B at depth? The
# final call read tg128 @ d16384 305.9 against session 17's 313.2. Default vs FT_L2_PREFETCH=0 at
# depth 0 and 16384, alternating.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session18/h200_g.sh; tar czf $OUT/resg.tgz -C /tmp resg",
#       carry=[".devcarry/pack"])
R=/tmp/resg
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
models_wait
export AB_BUDGET=330
ab_envs 2 $Q - FT_L2_PREFETCH=0 -- -p 0 -n 128 -d 0,4096,16384 -r 1 --bw-gbs 4562
finish resg
