#!/usr/bin/env bash
# Session 12, call 8: where a decode step goes now -- every kernel's duration (ncu
# gpu__time_duration, serialised, caches not flushed) of a 3-token generation (prefill of 4
# tokens + 2 decode steps) on Llama-8B and Qwen3-30B-A3B; the last step is read off the CSV.
#   run(command="timeout -s KILL 300 bash bench/session12/h200_h.sh; tar czf $OUT/resh.tgz -C /tmp resh",
#       carry=[".devcarry/pack"])
R=/tmp/resh
source bench/device_common.sh
model llama8b-nvfp4; model qwen3moe-30b-nvfp4
for m in qwen3moe-30b-nvfp4 llama8b-nvfp4; do
  budget 250 "ncu $m" || break
  log "ncu $m"
  timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    $B/ft generate --model $M/$m.gguf --device cuda --prompt-tokens 1,2,3,4 --max-tokens 3 --temperature 0 --ignore-eos \
    > $R/ncu_$m.csv 2>$R/ncu_$m.err
  log "rc=$? $(grep -c gpu__time_duration $R/ncu_$m.csv) kernels"
done
finish resh
