#!/usr/bin/env bash
# Session 25, call 5 (not run; binaries of 0d6f2a5 -- on main, `git revert 983f8d6` first): call 4 found the tail-less tiled instance slower alone too (6144x4096
# 8.0 vs 7.5 us), i.e. the kernel's code, not the chain. Probe: the tiled instances with the step loop unrolled by
# two (FT_MMA_VARIANT: bit 0 tail-less, bit 1 unrolled), alone and in Llama-8B tg128 alternating.
#   PACK_ONLY="ft ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 150 bash bench/session25/h200_j.sh; tar czf $OUT/resj.tgz -C /tmp resj",
#       carry=[".devcarry/pack"])
R=/tmp/resj
source bench/device_common.sh
models_bg llama8b-nvfp4
for v in 0 2 3; do
  log "FT_MMA_VARIANT=$v ft-bench-gemv-cuda --tiled"
  FT_MMA_VARIANT=$v timeout 40 "$B/ft-bench-gemv-cuda" --tiled --pool-gib 1 > "$R/tiled_$v.txt" 2>&1
  grep -E "(6144x4096|28672x4096|4096x14336) .*n3/" "$R/tiled_$v.txt" | head -4
done
models_wait
AB_BUDGET=130 ab_envs 2 $L FT_MMA_VARIANT=0 FT_MMA_VARIANT=2 FT_MMA_VARIANT=3 -- -p 0 -n 128 -r 1 --bw-gbs 4562
# SASS of the tensor-core GEMV's 4 x 2 / 8 x 3 tiled instances, where the device image has cuobjdump (not this dev
# machine): the fast (tail's code) and slow (tail-less) schedules side by side.
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
[ -x "$CUOBJ" ] && timeout 60 "$CUOBJ" -sass "$B/ft" 2>/dev/null |
  awk '/Function : /{p = ($0 ~ /nvfp4_mma_kernelILi(4ELi2|8ELi3)ELb1E/)} p' > "$R/sass_mma.txt"
finish resj
