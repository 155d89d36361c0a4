#!/usr/bin/env bash
# Session 12, call 2: ncu stall reasons of the decode GEMVs in a real decode step (call 1's ncu
# line had `-m` where ft generate takes --model), plus the same with the bulk GEMV routed
# (FT_GEMV_NVFP4_BULK=2,8: its consumers set its time, session 11).
#   run(command="timeout -s KILL 400 bash bench/session12/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
model llama8b-nvfp4
L=$M/llama8b-nvfp4.gguf
# A 4-token prompt, so a decode step launches 129 GEMVs (32 layers x 4 + the head): 246..257 =
# step 2 from layer 29's o projection to the head. ncu serialises them; caches flushed per pass.
NCU="ncu --clock-control none -k regex:nvfp4_mma_kernel|slab_kernel|gemv_half_kernel|nvfp4_bulk_kernel"
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters"
for v in plan bulk; do
  budget 330 "ncu $v" || break
  log "ncu $v"
  [ $v = bulk ] && export FT_GEMV_NVFP4_BULK=2,8
  timeout 140 $NCU $SEC --launch-skip 246 --launch-count 12 -o $R/$v --force-overwrite \
    $B/ft generate --model $L --device cuda --prompt-tokens 1,2,3,4 --max-tokens 6 --temperature 0 --ignore-eos > $R/ncu_run_$v.txt 2>&1
  log "ncu rc=$?"
  unset FT_GEMV_NVFP4_BULK
  ncu --import $R/$v.ncu-rep --print-details all > $R/details_$v.txt 2>&1
  grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Achieved Active Warps|Registers Per|Grid Size|Block Size" $R/details_$v.txt | head -120
  ncu --import $R/$v.ncu-rep --page raw --csv --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,gpu__time_duration.sum,launch__grid_size,launch__block_size > $R/stalls_$v.csv 2>&1
  ncu --import $R/$v.ncu-rep --page source --csv --print-source sass > $R/sass_$v.csv 2>&1
  ls -la $R/sass_$v.csv
done
finish resb
