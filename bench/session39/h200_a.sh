#!/usr/bin/env bash
# Prepared in session 38 for the next H200 call: where the FFN norm fold loses. Three producer forms (ticket,
# cluster, wide) have lost to the FFN norm as its own launch (sessions 33, 36, 38), while leaving the norm out
# altogether gains ~4.6% (session 31) -- so the cost sits in the consumer (gate|up summing 128 partials and
# rescaling its activation scales before its first mma) or in gate|up's placement when released under wo. A
# -DFT_CHAIN_TRACE=ON build records every launch's release; bench/chain_trace.py gives each position's span and
# early (how long block 0 sat parked). Llama-8B tg128 -p 0 --ctx-size 4096 -r 1: as is, with the FFN fold
# (FT_NORM_FOLD=3), without the FFN norm (FT_DEBUG_SKIP=norm2: garbage tokens, a time only).
#   cmake --preset cuda -B build-trace -DFT_CHAIN_TRACE=ON && cmake --build build-trace -j2 --target ft ft-bigmodel
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-trace   (no llama-src in the pack)
#   run(command="timeout -s KILL 300 bash bench/session39/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4
models_wait
ab_envs 1 "$L" "FT_CHAIN_TRACE=$R/base" "FT_CHAIN_TRACE=$R/f3 FT_NORM_FOLD=3" \
  "FT_CHAIN_TRACE=$R/k2 FT_DEBUG_SKIP=norm2" -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
chain_sums base f3 k2
finish resa
