#!/usr/bin/env bash
# Session 26, call 1 (binaries of wip/s26-probe = main + `git revert 983f8d6`): session 25's unrun probe
# (FT_MMA_VARIANT: bit 0 tail-less, bit 1 step loop unrolled by 2), alone and in Llama-8B tg128 alternating;
# the SASS of the tiled tensor-core instances; ncu (source counters, stall reasons) of the tiled mma launches of a
# Llama-8B decode step, so the next change to that kernel is chosen from its instruction mix, not guessed.
#   PACK_ONLY="ft ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session26/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4
for v in 0 2 3; do
  log "FT_MMA_VARIANT=$v ft-bench-gemv-cuda --tiled"
  FT_MMA_VARIANT=$v timeout 40 "$B/ft-bench-gemv-cuda" --tiled --pool-gib 1 > "$R/tiled_$v.txt" 2>&1
  grep -E "(6144x4096|28672x4096|4096x14336) .*n3/" "$R/tiled_$v.txt" | head -4
done
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
log "cuobjdump: $CUOBJ"
[ -n "$CUOBJ" ] && timeout 60 "$CUOBJ" -sass "$B/ft" 2>/dev/null |
  awk '/Function : /{p = ($0 ~ /nvfp4_mma_kernel/)} p' > "$R/sass_mma.txt"
grep -c . "$R/sass_mma.txt"
models_wait
AB_BUDGET=170 ab_envs 2 $L FT_MMA_VARIANT=0 FT_MMA_VARIANT=2 FT_MMA_VARIANT=3 -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 200 ncu && {
  timeout 80 ncu --clock-control none -k 'regex:nvfp4_mma_kernel' --launch-skip 100 --launch-count 3 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --section LaunchStats --section MemoryWorkloadAnalysis -o $R/mma --force-overwrite \
    $B/ft generate --model $L --device cuda --prompt-tokens 1,2,3,4 --max-tokens 4 --temperature 0 --ignore-eos \
    > $R/ncu_run.txt 2>&1
  log "ncu rc=$?"
  ncu --import $R/mma.ncu-rep --print-details all > $R/details.txt 2>&1
  grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc|Memory Throughput|DRAM Throughput|Grid Size|Block Size" $R/details.txt | cut -c1-150 | head -40
  ncu --import $R/mma.ncu-rep --page source --csv --print-source sass > $R/sass.csv 2>&1
  ls -la $R/sass.csv
}
finish resa
