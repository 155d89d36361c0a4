#!/usr/bin/env bash
# Session 12, call 1: (1) the bulk GEMV at 2 CTAs per SM (branch wip/bulk-ctas): its bit-for-bit
# tests, --sol, Llama-8B end to end; (2) ncu stall reasons of the decode GEMVs in a real decode
# step (never profiled before: benches/h200.md run 3 "profile stall reasons before more guessing").
#   run(command="timeout -s KILL 540 bash bench/session12/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm --format=csv > $R/smi.txt 2>&1
(cd $B && timeout 60 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemvBulk*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|exception" $R/test.txt | head -8
BULK_OK=1; grep -q "FAILED\|rc=124\|rc=137" $R/test.txt && BULK_OK=0
model llama8b-nvfp4
L=$M/llama8b-nvfp4.gguf
log "ncu"
# Decode kernels of one step in context (ncu serialises them; caches flushed per pass).
# The prompt is 4 tokens, so a decode step launches 129 GEMVs (32 layers x 4 + the head); 246..257 = step 2 from layer 29 s o projection to the head.
NCU="ncu --clock-control none --target-processes all -k regex:nvfp4_mma_kernel|slab_kernel|gemv_half_kernel|nvfp4_bulk_kernel"
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters"
timeout 150 $NCU $SEC --launch-skip 246 --launch-count 12 -o $R/dec --force-overwrite \
  $B/ft generate -m $L --device cuda --prompt-tokens 1,2,3,4 --max-tokens 6 --temperature 0 --ignore-eos > $R/ncu_run.txt 2>&1
log "ncu rc=$?"
ncu --import $R/dec.ncu-rep --print-details all > $R/ncu_details.txt 2>&1
grep -E "^\s+[a-z_0-9]+(kernel)|Duration|DRAM Throughput|Memory Throughput|Warp Cycles Per Issued|Issued Warp Per|Stall|No Eligible|Active Warps Per|Achieved Occ|Registers Per|Block Size|Grid Size|Executed Ipc A|Issue Slots Busy" $R/ncu_details.txt | head -150
ncu --import $R/dec.ncu-rep --page raw --csv --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,gpu__time_duration.sum > $R/ncu_stalls.csv 2>&1
log "sass"
ncu --import $R/dec.ncu-rep --page source --csv --print-source sass > $R/ncu_sass.csv 2>&1; ls -la $R/ncu_sass.csv
[ $BULK_OK = 1 ] && { timeout 150 $B/ft-bench-gemv-cuda --sol --launches 40 --pool-gib 0.5 > $R/sol.txt 2>&1; grep -E "^\| [0-9]|note|rror" $R/sol.txt | cut -c1-400; }
for v in "" "1,8,2,2" "1,4,2,2" "2,8,2,2"; do
  budget 500 "ft bench $v" || break
  [ -n "$v" ] && [ $BULK_OK = 0 ] && break
  log "FT_GEMV_NVFP4_BULK=$v"
  FT_GEMV_NVFP4_BULK=$v timeout 45 "$B/ft" bench -m $L --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
done
rm -f $R/dec.ncu-rep.bak
finish resa
