#!/usr/bin/env bash
# Session 11, call 3 (warm machine of call 2: llama-bench and the model already there; built
# afresh otherwise): the llama.cpp rows call 2 lost (llama-bench right-aligns its test column,
# which call 2's row filter missed), alternating with ours, raw tables kept.
#   run(command="timeout -s KILL 580 bash bench/session11/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
if [ -x $W/llama.cpp/build/bin/llama-bench ]; then echo "rc=0 (kept)" > $W/done; else rm -f $W/done; llama_build_bg; fi
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
llama_wait 330
lb() { timeout 60 $LB -m $Q -ngl 99 -fa 1 -t 16 -r 2 -o md "$@" 2>>$R/lb.err | tee -a $R/lb_raw.md | rows | tee -a $R/llama-bench.md; }
ftb() { timeout 60 "$B/ft" bench -m $Q --device cuda "$@" 2>>$R/ft.err | rows | tee -a $R/ft.md; }
for round in 1 2; do
  budget 400 "round $round" || break
  log "round $round: -ncmoe 48 / cpu backend (pp512, tg32)"
  lb -p 512 -n 32 -ncmoe 48
  ftb --moe-backend cpu -p 512 -n 32 -r 2
  log "round $round: -ncmoe 24 / offload / hybrid (tg32, rate 0.5)"
  lb -p 0 -n 32 -ncmoe 24
  ftb --moe-backend offload --moe-cache-rate 0.5 -p 0 -n 32 -r 2
  ftb --moe-backend hybrid --moe-cache-rate 0.5 -p 0 -n 32 -r 2
done
grep -h "measured one-token\|memory at the end" $R/ft.err | cut -c1-300 | head -12
if budget 460 "CPU rows"; then
  timeout 25 $B/ft-bench-moe-cpu --threads 15 --types nvfp4 --isas avx512 --mib 1024 --iters 60 --rounds 2 2>&1 | grep -E "host read|exact" | tee -a $R/rows.txt
fi
if budget 470 "pp8192"; then
  log "pp8192, experts in host RAM (cpu backend)"
  ftb --moe-backend cpu -p 8192 -n 0 -r 1 --ctx-size 8704
fi
finish resb
