#!/usr/bin/env bash
# Session 11, call 2: every issue-4 figure beside llama.cpp's CUDA build in one call (session
# 10's h200_issue4.sh kept only the last line of each table, which for llama-bench is its
# "build:" line: the llama.cpp rows of call 1 were lost), the GPU memory at the end of each run
# (the router's sort stack moved to shared memory), and the one-wave speed-of-light reads.
#   run(command="timeout -s KILL 580 bash bench/session11/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
budget() { [ $(($(date +%s) - T0)) -lt "$1" ] || { log "skipped (time): $2"; return 1; }; }
# This filter missed llama-bench's right-aligned rows (this call's llama.cpp figures were lost);
# device_common.sh's rows() is the mended one.
rows() { grep -E '^\| .*\| (pp|tg)[0-9]+ ' ; }
llama_build_bg
log "kernel stack frames (cuobjdump, >= 256 bytes)"
if command -v cuobjdump >/dev/null; then
  cuobjdump -res-usage $B/ft 2>/dev/null | awk '/Function/{f=$2} /STACK:/{match($0,/STACK:[0-9]+/); v=substr($0,RSTART+6,RLENGTH-6)+0; if (v>=256) print v, f}' | sort -rn | head -8 | tee $R/stack.txt
else log "no cuobjdump"; fi
(cd $B && timeout 120 ./test_cuda --gtest_brief=1 --gtest_filter='CudaOpsStlSort*:CudaOpsMoeRoute*:*MoeBackendTokens*:*HybridVsFused*' > $R/test.txt 2>&1; echo "tests rc=$?" >> $R/log.txt) &
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
wait
grep -E "tests? ran|PASSED|FAILED" $R/test.txt | tail -6
log "one-wave speed-of-light reads (build running)"
timeout 100 $B/ft-bench-gemv-cuda --sol --launches 40 --pool-gib 0.5 > $R/sol.txt 2>&1; grep -E "^\|" $R/sol.txt | cut -c1-260
log "offload tg32 (build running)"
timeout 40 "$B/ft" bench -m $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 -p 0 -n 32 -r 2 2>$R/off_b.err | rows | tee -a $R/ft.md
llama_wait 330
[ -x "${LB:-}" ] || log "no llama-bench: the llama.cpp figures below are missing"
lb() { timeout 60 $LB -m $Q -ngl 99 -fa 1 -t 16 -r 2 -o md "$@" 2>>$R/lb.err | rows | tee -a $R/llama-bench.md; }
ftb() { timeout 60 "$B/ft" bench -m $Q --device cuda "$@" 2>>$R/ft.err | rows | tee -a $R/ft.md; }
for round in 1 2; do
  budget 440 "round $round" || break
  log "round $round: -ncmoe 48 / cpu backend (pp512, tg32)"
  [ -x "${LB:-}" ] && lb -p 512 -n 32 -ncmoe 48
  ftb --moe-backend cpu -p 512 -n 32 -r 2
  log "round $round: -ncmoe 24 / offload / hybrid (tg32, rate 0.5)"
  [ -x "${LB:-}" ] && lb -p 0 -n 32 -ncmoe 24
  ftb --moe-backend offload --moe-cache-rate 0.5 -p 0 -n 32 -r 2
  if [ $round = 1 ]; then FT_LOG_LEVEL=debug ftb --moe-backend hybrid --moe-cache-rate 0.5 -p 0 -n 32 -r 2
  else ftb --moe-backend hybrid --moe-cache-rate 0.5 -p 0 -n 32 -r 2; fi
done
grep -h "measured one-token\|host memory after\|cuda memory\|device memory" $R/ft.err | cut -c1-300 | head -24
if budget 500 "cost model"; then
  log "offload generate --stats (512-token prompt) and the H2D rate right after"
  FT_MOE_GATHER_CLOCK=1 timeout 40 "$B/ft" generate --model $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 \
    --prompt-tokens $(seq -s, 1000 1511) --max-tokens 64 --ignore-eos --temperature 0 --stats > $R/gen_off.txt 2>&1
  grep -h "decode [0-9]* tokens\|per decode step\|speculative fetches\|gather timeline\|memory at the end" $R/gen_off.txt | sed 's/ | cuda.*//' | cut -c1-300
  timeout 30 "$B/ft" bench-bw --format nvfp4 --host-mib 512 --bank-mib 512 --iters 16 --reps 3 2>&1 | grep -i "h2d\|pinned" | head -3
fi
if budget 530 "CPU rows"; then
  log "CPU rows: 15 threads, 128 experts"
  timeout 25 $B/ft-bench-moe-cpu --threads 15 --types nvfp4 --isas avx512 --mib 1024 --iters 60 --rounds 2 2>&1 | grep -E "host read|exact" | tee -a $R/rows.txt
fi
finish resa
