#!/usr/bin/env bash
# Session 47, call 6: where the last CTA's norm spends its ~9-14 us (calls 4-5: neither the fences, the loads'
# round trips nor the weights' staging explain it). ncu of two NR wo launches (FT_NORM_CTA=1) with source counters
# and stall reasons; the per-instruction samples of the tail come back in sass.csv.
#   run(command="timeout -s KILL 200 bash bench/session47/call6.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res6
source bench/device_common.sh
ab_preamble llama8b-nvfp4
P=$(seq -s, 1 64)
FT_NORM_CTA=1 timeout 120 ncu --clock-control none -k "regex:lean_slab" --launch-skip 200 --launch-count 2 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
  -o "$R/nr" --force-overwrite \
  "$B/ft" generate --model "$L" --device cuda --prompt-tokens "$P" --max-tokens 8 --temperature 0 --ignore-eos \
  > "$R/ncu_run.txt" 2>&1
log "ncu rc=$?"
ncu --import "$R/nr.ncu-rep" --print-details all > "$R/details.txt" 2>&1
grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|Stall|Grid Size|Registers" "$R/details.txt" | cut -c1-160 | head -40
ncu --import "$R/nr.ncu-rep" --page source --csv --print-source sass > "$R/sass.csv" 2>&1
gzip -f "$R/sass.csv" "$R/details.txt"; rm -f "$R/nr.ncu-rep"
finish res6
