#!/usr/bin/env bash
# Session 26, call 2 (binaries of wip/s26-bulk, incl. the predicated tile loads of mma_step_acc): the tiled tensor-core GEMV fed by bulk copies (FT_MMA_FEED: 1
# cp.async pieces as before, 2 one cp.async.bulk a step, 3 and the activation row by bulk copies): the feeds' bitwise
# test, the kernel alone at every warps x stages (dep mode), Llama-8B tg128 alternating, and ncu of feed 3's launches.
#   PACK_ONLY="ft ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda (test_cuda as well exceeds
#   the carry limit: the feeds' tokens are compared here instead, the test runs in a later call)
#   run(command="timeout -s KILL 300 bash bench/session26/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg llama8b-nvfp4
for v in 1 2 3; do
  log "FT_MMA_FEED=$v ft-bench-gemv-cuda --tiled"
  FT_MMA_FEED=$v timeout 40 "$B/ft-bench-gemv-cuda" --tiled --pool-gib 1 > "$R/tiled_$v.txt" 2>&1
  grep -E "^\| tiled" "$R/tiled_$v.txt" | awk -F'|' '{print $5, $7, $9, $11}' | head -40
done
models_wait
timeout 90 "$B/ft" generate --model $L --device cpu --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 24 \
  --temperature 0 --ignore-eos --json 2>/dev/null | grep -o '"tokens":\[[^]]*\]' > "$R/gen_cpu.txt"
log "cpu: $(cat "$R/gen_cpu.txt")"
for v in 1 2 3; do
  FT_MMA_FEED=$v timeout 60 "$B/ft" generate --model $L --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 24 \
    --temperature 0 --ignore-eos --json 2>/dev/null | grep -o '"tokens":\[[^]]*\]' > "$R/gen_$v.txt"
  log "feed $v: $(cat "$R/gen_$v.txt")"
done
AB_BUDGET=190 ab_envs 3 $L FT_MMA_FEED=1 FT_MMA_FEED=2 FT_MMA_FEED=3 -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 215 ncu && {
  FT_MMA_FEED=3 timeout 60 ncu --clock-control none -k 'regex:nvfp4_mma_kernel' --launch-skip 100 --launch-count 3 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --section LaunchStats -o $R/mma --force-overwrite \
    $B/ft generate --model $L --device cuda --prompt-tokens 1,2,3,4 --max-tokens 4 --temperature 0 --ignore-eos \
    > $R/ncu_run.txt 2>&1
  log "ncu rc=$?"
  ncu --import $R/mma.ncu-rep --print-details all > $R/details.txt 2>&1
  grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|Warp Cycles Per Issued|Memory Throughput|No Eligible" $R/details.txt | cut -c1-150 | head -30
  ncu --import $R/mma.ncu-rep --page source --csv --print-source sass > $R/sass.csv 2>&1
}
finish resb
