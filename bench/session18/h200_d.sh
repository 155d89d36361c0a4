#!/usr/bin/env bash
# Session 18, call 4: do the decode GEMVs run faster when their weights sit in L2? (Calls 1-3: an
# L2 prefetch of the next projection from a side branch gained Qwen3-30B-A3B ~0.6% and lost on
# Llama-8B.) ft-bench-gemv-cuda --experts with its default 2 GiB pool (every launch from HBM) and
# with a pool of 3 copies (shapes up to ~20 MB stay in the 60 MB L2), back to back and "dep".
#   PACK_ONLY="ft ft-bench-gemv-cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session18/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
log "hbm pool"
timeout 170 "$B/ft-bench-gemv-cuda" --experts > "$R/gemv_hbm.txt" 2>&1
log "l2 pool"
timeout 170 "$B/ft-bench-gemv-cuda" --experts --pool-gib 0.001 > "$R/gemv_l2.txt" 2>&1
grep -E "^\| (mma|slab|routed|expert|dense|case)|GB/s|us" "$R/gemv_hbm.txt" | head -5
finish resd
