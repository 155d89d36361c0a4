#!/usr/bin/env bash
# Prepared for the next session (not run): where the short-context decode attention's ~7.3 us a layer go (H100
# session 45 chain trace; ~5.3 us on the H200, session 31) -- the layer's largest cost after the GEMVs. ncu's stall
# reasons and source counters of the attention launches of a Llama-8B decode at ~64-128 keys (prompt 64 tokens),
# beside the lean wo and the FFN norm for scale; then the chain trace as is and with the attention's knobs that
# shape short contexts (one chunk of keys, no key bound). Binaries of a -DFT_CHAIN_TRACE=ON build:
#   cmake -S . -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DFT_CUDA=ON -DFT_CHAIN_TRACE=ON
#   cmake --build build-trace -j2 --target ft ft-bigmodel
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-trace
#   run(command="timeout -s KILL 400 bash bench/session46/next_attn.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resa
source bench/device_common.sh
ab_preamble llama8b-nvfp4
P=$(seq -s, 1 64)
timeout 120 ncu --clock-control none -k "regex:attn|lean_slab|rmsnorm" --launch-skip 400 --launch-count 9 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
  --section LaunchStats --section MemoryWorkloadAnalysis -o "$R/attn" --force-overwrite \
  "$B/ft" generate --model "$L" --device cuda --prompt-tokens "$P" --max-tokens 8 --temperature 0 --ignore-eos \
  > "$R/ncu_run.txt" 2>&1
log "ncu rc=$?"
ncu --import "$R/attn.ncu-rep" --print-details all > "$R/details.txt" 2>&1
grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|Stall|Issue Slots Busy|L2 Hit|DRAM Throughput|Grid Size|Block Size" \
  "$R/details.txt" | cut -c1-160 | head -90 | tee -a "$R/log.txt"
ncu --import "$R/attn.ncu-rep" --page source --csv --print-source sass > "$R/sass.csv" 2>&1
gzip -f "$R/sass.csv" "$R/details.txt"; rm -f "$R/attn.ncu-rep"
AB_BUDGET=330 ab_envs 1 "$L" "FT_CHAIN_TRACE=$R/base" "FT_CHAIN_TRACE=$R/nob FT_ATTN_KEY_BOUND=0" \
  "FT_CHAIN_TRACE=$R/pre FT_ATTN_PRE_L1=1" -- -p 0 -n 128 -r 1 --bw-gbs 4562
chain_sums base nob pre
log "ft rows:"; cat "$R/ft.md"
finish resa
