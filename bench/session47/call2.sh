#!/usr/bin/env bash
# Session 47, call 2 (session 46's prepared next_attn.sh, which this replaces, on a trace build packed beside main's binaries as
# ft_trace): where the short-context decode attention's ~7.3 us a layer go (H100 session 45 chain trace) -- ncu's
# stall reasons and source counters of the attention launches of a Llama-8B decode at 64-72 keys beside the lean wo
# and the FFN norm; then chain traces as is, without the key bound, with the attention's L1 prefetch, and with the
# FFN norm by wo's last CTA (FT_NORM_CTA=1: where its time goes in the layer).
#   cmake --build build-trace -j2 --target ft && cp build-trace/ft /tmp/ft_trace
#   PACK_ONLY="ft test_cuda ft-bigmodel" PACK_EXTRA=/tmp/ft_trace scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 420 bash bench/session47/call2.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res2
source bench/device_common.sh
ab_preamble llama8b-nvfp4
P=$(seq -s, 1 64)
timeout 120 ncu --clock-control none -k "regex:attn|lean_slab|rmsnorm" --launch-skip 400 --launch-count 9 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
  --section LaunchStats --section MemoryWorkloadAnalysis -o "$R/attn" --force-overwrite \
  "$B/ft_trace" generate --model "$L" --device cuda --prompt-tokens "$P" --max-tokens 8 --temperature 0 --ignore-eos \
  > "$R/ncu_run.txt" 2>&1
log "ncu rc=$?"
ncu --import "$R/attn.ncu-rep" --print-details all > "$R/details.txt" 2>&1
grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|Stall|Issue Slots Busy|L2 Hit|DRAM Throughput|Grid Size|Block Size" \
  "$R/details.txt" | cut -c1-160 | head -90 | tee -a "$R/log.txt"
ncu --import "$R/attn.ncu-rep" --page source --csv --print-source sass > "$R/sass.csv" 2>&1
gzip -f "$R/sass.csv" "$R/details.txt"; rm -f "$R/attn.ncu-rep"
AB_BUDGET=330 ab_envs 1 "$L" "FTBIN=ft_trace FT_CHAIN_TRACE=$R/base" "FTBIN=ft_trace FT_CHAIN_TRACE=$R/nob FT_ATTN_KEY_BOUND=0" \
  "FTBIN=ft_trace FT_CHAIN_TRACE=$R/pre FT_ATTN_PRE_L1=1" "FTBIN=ft_trace FT_CHAIN_TRACE=$R/cta FT_NORM_CTA=1" -- -p 0 -n 128 -r 1 --bw-gbs 4562
chain_sums base nob pre cta
log "ft rows:"; cat "$R/ft.md"
finish res2
