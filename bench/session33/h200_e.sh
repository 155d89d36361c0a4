#!/usr/bin/env bash
# Session 33, call 7: where call 2's 4% went. ncu (serialised launches) of the tensor-core GEMV launches of one
# decode step in main's build and in f78cae6's (the fold's code in the shared instances, 4.2% slower end to end):
# duration, issue stalls, instruction counts of the qkv (6144x4096), gate|up (28672x4096) and down (4096x14336)
# launches. Plus tg128 of both, alternating.
R=/tmp/rese
source bench/device_common.sh
xz -dc .devcarry/pack/ft-c2.xz > "$B/ft-c2" && chmod +x "$B/ft-c2"
models_bg llama8b-nvfp4
models_wait
for round in 1 2; do for b in ft ft-c2; do
  log "$b round $round"
  timeout 90 "$B/$b" bench -m "$L" --device cuda -p 0 -n 128 -r 2 --ctx-size 4096 --bw-gbs 4562 2>>"$R/ft.err" | rows | tee -a "$R/ft.md"
done; done
for b in ft ft-c2; do
  budget 300 "ncu $b" || break
  timeout 100 ncu --clock-control none -k 'regex:nvfp4_mma_kernel' --launch-skip 96 --launch-count 9 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section InstructionStats \
    -o $R/$b --force-overwrite \
    $B/$b generate --model $L --device cuda --prompt-tokens 1,2,3,4 --max-tokens 6 --temperature 0 --ignore-eos \
    > $R/ncu_$b.txt 2>&1
  log "ncu $b rc=$?"
  ncu --import $R/$b.ncu-rep --print-details all > $R/details_$b.txt 2>&1
  grep -E "nvfp4_mma_kernel|Duration|Warp Cycles Per Issued|Issue Slots Busy|Executed Instructions  |Registers Per|Grid Size|Stall" $R/details_$b.txt | cut -c1-160 | head -60
done
finish rese
