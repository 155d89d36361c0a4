#!/usr/bin/env bash
# Session 25, call 1: the deferred attention norm (cuda/norm_defer.h; FT_NORM_DEFER), binaries of af887ca
# (reverted in a873786: neither the header nor the switch is on main): every GPU test (also the unverified b77044f / 7e8bebe), the greedy tokens on / off,
# Llama-8B tg128 alternating on / off, Qwen3-30B-A3B once (unchanged path: a control).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session25/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 320
models_wait
tokens_under "FT_NORM_DEFER=0" $L
FT_STEP_CLOCK=1 timeout 60 "$B/ft" bench -m $L --device cuda -p 0 -n 128 -r 1 2>&1 | grep -E "step clock|tg128" | tee -a $R/log.txt
AB_BUDGET=470 ab_envs 3 $L FT_NORM_DEFER=0 - -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=520 ab_envs 1 $Q - -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resa
