#!/usr/bin/env bash
# Session 31, call 7: the GEMV criterion re-measured on main's kernels (m16n8k32 tiled GEMV since session 30):
# ft-bench-gemv-cuda --experts (the MoE expert shapes, and the dense one-token shapes routed / slab / mma / tiled,
# back to back and after a dependent quantiser) and --tiled (the tiled kernel at each warps x stages, dep mode).
R=/tmp/resd
source bench/device_common.sh
log "ft-bench-gemv-cuda --experts"
timeout 150 "$B/ft-bench-gemv-cuda" --experts --pool-gib 1 > "$R/experts.txt" 2>&1; echo "rc=$?" >> "$R/experts.txt"
log "ft-bench-gemv-cuda --tiled"
timeout 150 "$B/ft-bench-gemv-cuda" --tiled --pool-gib 1 > "$R/tiled.txt" 2>&1; echo "rc=$?" >> "$R/tiled.txt"
cat "$R/experts.txt" "$R/tiled.txt"
finish resd
