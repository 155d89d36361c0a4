#!/usr/bin/env bash
# Session 22, call 3: where the routing's remaining ~4.6 us a layer goes (FT_DEBUG_SKIP=route 556 vs 495 tok/s
# in call 2): ncu with source counters of the lean gate|up launch that routes (fast route) and, in a second
# run, of the one that does not (FT_DEBUG_SKIP=route); and tg128 with the routing in the router's last block
# (FT_MOE_ROUTE_IN_EXPERTS=0, now with the fast route too) against the routing in the gate|up launch.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 330 bash bench/session22/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
model qwen3moe-30b-nvfp4
AB_BUDGET=100 ab_envs 2 $Q - FT_MOE_ROUTE_IN_EXPERTS=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
for v in route skip; do
  e=""; [ $v = skip ] && e="FT_DEBUG_SKIP=route"
  env $e timeout 100 ncu --clock-control none -k 'regex:norm_router_route|lean_slab' --launch-skip 300 --launch-count 3 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy \
    -o $R/$v --force-overwrite \
    $B/ft generate --model $Q --device cuda --prompt-tokens 1,2,3,4 --max-tokens 6 --temperature 0 --ignore-eos > $R/ncu_$v.txt 2>&1
  log "ncu $v rc=$?"
  ncu --import $R/$v.ncu-rep --print-details all > $R/details_$v.txt 2>&1
  grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|Warp Cycles Per Issued|Issue Slots Busy|Grid Size|Registers|Achieved Occ|Theoretical Occ" $R/details_$v.txt | cut -c1-150 | head -40
  ncu --import $R/$v.ncu-rep --page source --csv --print-source sass > $R/sass_$v.csv 2>&1
  rm -f $R/$v.ncu-rep
done
finish resc
