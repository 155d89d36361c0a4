#!/usr/bin/env bash
# Session 21, call 7: where the norm + router launch's time goes (its link costs ~9 us a layer inside the chain
# with or without its routing tail): ncu with source-level stall sampling of that kernel and of the lean gate|up
# launch that now routes, in a Qwen3-30B-A3B decode step (serialised).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 200 bash bench/session21/h200_g.sh; tar czf $OUT/resg.tgz -C /tmp resg",
#       carry=[".devcarry/pack"])
R=/tmp/resg
source bench/device_common.sh
model qwen3moe-30b-nvfp4
timeout 100 ncu --clock-control none -k 'regex:norm_router_route|lean_slab' --launch-skip 300 --launch-count 4 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats \
  --section Occupancy -o $R/router --force-overwrite \
  $B/ft generate --model $Q --device cuda --prompt-tokens 1,2,3,4 --max-tokens 6 --temperature 0 --ignore-eos > $R/ncu_run.txt 2>&1
log "ncu rc=$?"
ncu --import $R/router.ncu-rep --print-details all > $R/details.txt 2>&1
grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|Warp Cycles Per Issued|Issue Slots Busy|Achieved Active Warps|Grid Size|Block Size|Theoretical Occ" $R/details.txt | cut -c1-150 | head -60
ncu --import $R/router.ncu-rep --page source --csv --print-source sass > $R/sass.csv 2>&1
ls -la $R/sass.csv
finish resg
