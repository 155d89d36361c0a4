#!/usr/bin/env bash
# Session 21, call 1: session 20's review commits (3b3580b, bbd6844, e0a10d9; never run on the device) --
# the tiled / GEMV / attention tests and tg128 on both models -- then ncu of Qwen3-30B-A3B's decode MoE
# kernels inside a decode step (the experts take ~20 us a layer for 4.6 us of bytes: where does it go?).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session21/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 150 'CudaNvfp4Tiled.*:GpuNvfp4Tiled.*:CudaGemv*:CudaAttention*:Models/GpuVsCpu.*'
models_wait
AB_BUDGET=230 ab_envs 1 $L - -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=260 ab_envs 1 $Q - -- -p 0 -n 128 -r 1 --bw-gbs 4562
# A 4-token prompt, 6 tokens: per decode layer five launches match (wo slab, norm+router+route, the
# gate/up pair slab, swiglu, down+combine packed); skip 960 lands in a decode step whatever the prefill
# launches. ncu serialises the kernels and flushes caches between passes.
NCU="ncu --clock-control none -k regex:slab_kernel|packed_kernel|swiglu_kernel|norm_router_route_kernel"
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters"
if budget 300 ncu; then
  log ncu
  timeout 150 $NCU $SEC --launch-skip 960 --launch-count 10 -o $R/moe --force-overwrite \
    $B/ft generate --model $Q --device cuda --prompt-tokens 1,2,3,4 --max-tokens 6 --temperature 0 --ignore-eos > $R/ncu_run.txt 2>&1
  log "ncu rc=$?"
  ncu --import $R/moe.ncu-rep --print-details all > $R/details.txt 2>&1
  grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Achieved Active Warps|Registers Per|Grid Size|Block Size|Theoretical Occ|Executed Ipc A" $R/details.txt | head -160
  ncu --import $R/moe.ncu-rep --page raw --csv --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,gpu__time_duration.sum,launch__grid_size,launch__block_size,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active > $R/stalls.csv 2>&1
  ncu --import $R/moe.ncu-rep --page source --csv --print-source sass > $R/sass.csv 2>&1
  ls -la $R/sass.csv
fi
finish resa
