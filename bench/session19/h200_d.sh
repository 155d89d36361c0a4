#!/usr/bin/env bash
# Session 19, call 4: the tiled layout's one-token kernels over their knobs (ft-bench-gemv-cuda
# --tiled: gemv_mma.cu warps x stages, gemv_mma_tma.cu warps x chunk x stages, dep mode) and
# --experts (its "dense tiled" rows beside routed / slab / mma on row-major bytes).
#   PACK_ONLY="ft ft-bench-gemv-cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session19/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
log "tiled sweep"
timeout 200 "$B/ft-bench-gemv-cuda" --tiled > "$R/gemv_tiled.txt" 2>&1
log "experts"
timeout 150 "$B/ft-bench-gemv-cuda" --experts > "$R/gemv_experts.txt" 2>&1
grep -E "^\| (tiled|dense tiled)" "$R/gemv_tiled.txt" "$R/gemv_experts.txt" | awk -F'|' '{print $2"|"$5"|"$7"|"$9"|"$11}' | sed 's/  */ /g'
finish resd
