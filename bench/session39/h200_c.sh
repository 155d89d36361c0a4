#!/usr/bin/env bash
# Session 39 call 5: chain traces of Llama-8B (a -DFT_CHAIN_TRACE=ON build): as is; with the step flow
# (FT_GEMV_FLOW=1: 5% slower in calls 1-4 -- where?); and session 38's prepared pair, the FFN fold
# (FT_NORM_FOLD=3) and no FFN norm (FT_DEBUG_SKIP=norm2: garbage tokens, a time only). In the flow the down
# projection's block 0 waits at the end of its steps, so its "early" is its steps' time and its span the
# time from gate|up's end to its own.
#   cmake --preset cuda -B build-trace -DFT_CHAIN_TRACE=ON && cmake --build build-trace -j2 --target ft ft-bigmodel
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-trace   (no llama-src in the pack)
#   run(command="timeout -s KILL 300 bash bench/session39/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
models_bg llama8b-nvfp4
models_wait
ab_envs 1 "$L" "FT_CHAIN_TRACE=$R/base" "FT_CHAIN_TRACE=$R/flow FT_GEMV_FLOW=1" "FT_CHAIN_TRACE=$R/f3 FT_NORM_FOLD=3" \
  "FT_CHAIN_TRACE=$R/k2 FT_DEBUG_SKIP=norm2" -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
chain_sums base flow f3 k2
finish resc
