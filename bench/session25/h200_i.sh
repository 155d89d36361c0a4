#!/usr/bin/env bash
# Session 25, call 4 (binaries of the GLU split, e62ff8b; FT_MMA_GLU_SPLIT is not on main since 983f8d6): is the split's loss the kernel or
# the chain? The tensor-core GEMV alone (ft-bench-gemv-cuda --tiled: the same kernel back to back, code warm) on
# the tail's instance (FT_MMA_GLU_SPLIT=0) and on the tail-less one (default), then Llama-8B tg128 alternating.
#   PACK_ONLY="ft ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session25/h200_i.sh; tar czf $OUT/resi.tgz -C /tmp resi",
#       carry=[".devcarry/pack"])
R=/tmp/resi
source bench/device_common.sh
models_bg llama8b-nvfp4
for v in 0 1; do
  log "FT_MMA_GLU_SPLIT=$v ft-bench-gemv-cuda --tiled"
  FT_MMA_GLU_SPLIT=$v timeout 60 "$B/ft-bench-gemv-cuda" --tiled --pool-gib 1 > "$R/tiled_$v.txt" 2>&1
  grep -E "6144x4096|28672x4096|4096x14336" "$R/tiled_$v.txt" | head -12
done
models_wait
AB_BUDGET=230 ab_envs 2 $L FT_MMA_GLU_SPLIT=0 - -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resi
