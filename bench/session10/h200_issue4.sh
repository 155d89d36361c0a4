#!/usr/bin/env bash
# Prepared in session 10 for the next session's first call (not yet run): every issue-4
# figure in one call beside llama.cpp's CUDA build, CPU-sensitive runs only after the build.
#   run(command="timeout -s KILL 580 bash bench/session10/h200_issue4.sh; tar czf $OUT/res4.tgz -C /tmp res4",
#       carry=[".devcarry/pack"])   (pack: scripts/pack-device.sh build-cuda + scripts/pack-llama-src.sh)
R=/tmp/res4
source bench/device_common.sh
budget() { [ $(($(date +%s) - T0)) -lt "$1" ] || { log "skipped (time): $2"; return 1; }; }
llama_build_bg
log "tests while llama.cpp builds"
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 --gtest_filter='Moe*:*OffloadVsFused*:*HybridVsFused*:MoeBackendTokens*:Qwen35MoeBackends*' > $R/test_moe.txt 2>&1; echo "test_moe rc=$?" >> $R/log.txt) &
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
wait
grep -E "tests? ran|PASSED|FAILED" $R/test_moe.txt | tail -6
(cd $B && timeout 60 ./test_moe_cpu --gtest_brief=1 > $R/test_moe_cpu.txt 2>&1; grep -E "tests? ran|PASSED|FAILED" $R/test_moe_cpu.txt | tail -3)
# GPU / PCIe-bound runs while the build still runs (offload; the PCIe cost model).
log "offload tg32 (build running)"
timeout 40 "$B/ft" bench -m $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 -p 0 -n 32 -r 2 2>$R/off_b.err | tail -1 | tee -a $R/ft.md
llama_wait 330
[ -x "${LB:-}" ] || log "no llama-bench: the llama.cpp figures below are missing"
lb() { timeout 60 $LB -m $Q -ngl 99 -fa 1 -t 16 -r 2 -o md "$@" 2>>$R/lb.err | tail -1 | tee -a $R/llama-bench.md; }
ftb() { timeout 60 "$B/ft" bench -m $Q --device cuda "$@" 2>>$R/ft.err | tail -1 | tee -a $R/ft.md; }
for round in 1 2; do
  budget 470 "round $round" || break
  log "round $round: -ncmoe 48 / cpu backend (pp512, tg32)"
  [ -x "${LB:-}" ] && lb -p 512 -n 32 -ncmoe 48
  ftb --moe-backend cpu -p 512 -n 32 -r 2
  log "round $round: -ncmoe 24 / offload / hybrid / auto (tg32, rate 0.5)"
  [ -x "${LB:-}" ] && lb -p 0 -n 32 -ncmoe 24
  ftb --moe-backend offload --moe-cache-rate 0.5 -p 0 -n 32 -r 2
  ftb --moe-backend hybrid --moe-cache-rate 0.5 -p 0 -n 32 -r 2
done
grep -h "measured one-token\|host memory after\|cuda memory" $R/ft.err | sort -u | cut -c1-400 | head -8
if budget 520 "cost model"; then
  log "offload generate --stats (512-token prompt) and the H2D rate right after"
  FT_MOE_GATHER_CLOCK=1 timeout 40 "$B/ft" generate --model $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 \
    --prompt-tokens $(seq -s, 1000 1511) --max-tokens 64 --ignore-eos --temperature 0 --stats > $R/gen_off.txt 2>&1
  grep -h "decode [0-9]* tokens\|per decode step\|speculative fetches\|gather timeline" $R/gen_off.txt | sed 's/ | cuda.*//' | cut -c1-300
  timeout 30 "$B/ft" bench-bw --format nvfp4 --host-mib 512 --bank-mib 512 --iters 16 --reps 3 2>&1 | grep -i "h2d\|pinned" | head -3
fi
if budget 550 "CPU rows"; then
  log "CPU rows: 15 threads, 128 experts"
  timeout 25 $B/ft-bench-moe-cpu --threads 15 --types nvfp4 --isas avx512 --mib 1024 --iters 60 --rounds 2 2>&1 | grep -E "host read|exact" | tee -a $R/rows.txt
fi
finish res4
