#!/usr/bin/env bash
# Session 23, calls 6-7: the decode chain's timeline (ft built with -DFT_CHAIN_TRACE=ON in its own tree -- then
# branch wip/chain-trace, on main since 47e7a4e -- packed as the only ft): tg128 on both models with
# FT_CHAIN_TRACE, the raw per-launch CSVs back for bench/chain_trace.py (run on this machine).
#   pack: .devcarry/bin = the trace build's ft + main's ft-bigmodel + their libraries (see the session's README)
#   run(command="timeout -s KILL 240 bash bench/session23/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
models_wait
for m in $Q $L; do
  b=$(basename "$m" .gguf)
  FT_CHAIN_TRACE=$R/$b timeout 90 "$B/ft" bench -m "$m" --device cuda -p 0 -n 128 -r 1 --bw-gbs 4562 2>>"$R/ft.err" |
    rows | tee -a "$R/ft.md"
  ls -la "$R/$b".*.csv 2>&1 | tee -a "$R/log.txt"
done
grep -i "chain trace" "$R/ft.err" | tee -a "$R/log.txt"
finish resd
