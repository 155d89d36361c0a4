#!/usr/bin/env bash
# Session 9 final device call (session 8's, plus: the cpu backend's warm-up off beside on,
# FT_STEP_CLOCK on the decode runs, hybrid's generate, the CPU rows at 128 experts alone at the
# end). While llama.cpp's CUDA llama-bench builds here: all gpu-labelled tests beside the GPU parity suite, test_moe_cpu, then ft on
# the Llama-8B / Qwen3-30B-A3B NVFP4 files; after the build, llama.cpp beside ft on the same
# files (-ngl 99 -fa 1; -ncmoe 48 / 24 beside the cpu / hybrid / offload backends), then
# offload's --stats with a 512-token prompt (the PCIe cost model). Steps past the time budget
# are skipped so the logs always come back.
R=/tmp/resF9
source bench/device_common.sh
budget() { [ $(($(date +%s) - T0)) -lt "$1" ] || { log "skipped (time): $2"; return 1; }; }
llama_build_bg
log "test_cuda beside the parity suite"
(cd $B && timeout 330 ./test_cuda --gtest_brief=1 > $R/test_cuda.txt 2>&1; echo "test_cuda rc=$?" >> $R/log.txt) &
mkdir -p $R/parity
(cd $B && ./test_parity --gtest_list_tests --gtest_filter='Models/Parity.*' | awk '/^  /{split($1,a,"/"); print a[2]}' > $R/parity/list.txt
 cat $R/parity/list.txt | xargs -P 8 -I{} sh -c 'FT_PARITY_DEVICE=cuda FT_PARITY_MODELS=/tmp/ftp-{} timeout 250 ./test_parity --gtest_filter="Models/Parity.*/{}" > '$R'/parity/{}.txt 2>&1; echo "{} rc=$?" >> '$R'/parity/rc.txt')
log "parity done: $(awk '{print $2}' $R/parity/rc.txt | sort | uniq -c | tr '\n' ' ')"
wait
grep -E "^\[  (FAILED|PASSED) |tests? ran|FAILED TEST" $R/test_cuda.txt | sort -u | tail -25
grep "test_cuda rc" $R/log.txt
(cd $B && timeout 60 ./test_moe_cpu --gtest_brief=1 > $R/test_moe_cpu.txt 2>&1; echo "test_moe_cpu rc=$?"; grep -E "tests? ran|PASSED|FAILED" $R/test_moe_cpu.txt | tail -3)
for p in llama8b-nvfp4 qwen3moe-30b-nvfp4; do model $p; done
for p in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  budget 420 "ft bench $p" || continue
  log "ft bench $p"
  FT_STEP_CLOCK=1 timeout 70 "$B/ft" bench -m $M/$p.gguf --device cuda -p 512 -n 128 -d 0,4096,16384 -r 1 --bw-gbs 4562 2>>$R/ft.err | tee -a $R/ft.md
  grep -h "step clock" $R/ft.err | tail -1
done
grep -h "cuda memory\|host memory" $R/ft.err | sort -u | head -4
llama_wait 420
Q=$M/qwen3moe-30b-nvfp4.gguf
if [ -x $LB ]; then
  for p in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
    budget 470 "llama-bench $p" || continue
    log "llama-bench $p"
    timeout 40 $LB -m $M/$p.gguf -p 512 -n 128 -ngl 99 -fa 1 -r 1 -o md 2>>$R/lb.err | tee -a $R/llama-bench.md
  done
  if budget 500 "-ncmoe 48"; then
    log "llama-bench -ncmoe 48 (all experts on the CPU), 16 threads"
    timeout 50 $LB -m $Q -p 512 -n 32 -ngl 99 -fa 1 -ncmoe 48 -t 16 -r 1 -o md 2>>$R/lb.err | tee -a $R/llama-bench.md
  fi
fi
if budget 530 "ft cpu backend"; then
  log "ft cpu backend (same call)"
  timeout 45 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 512 -n 32 -r 2 2>$R/moe_cpu.err | tail -2 | tee -a $R/ft.md
  grep -h "host memory\|cuda memory\|moe:\|warm-up:" $R/moe_cpu.err | head -5
  log "ft cpu backend, warm-up off (FT_MOE_CPU_WARM_KIB=0)"
  FT_MOE_CPU_WARM_KIB=0 timeout 45 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 0 -n 32 -r 2 2>$R/moe_cpu0.err | tail -1 | tee -a $R/ft.md
fi
if [ -x "${LB:-}" ] && budget 545 "-ncmoe 24"; then
  log "llama-bench -ncmoe 24 (half)"
  timeout 25 $LB -m $Q -p 0 -n 32 -ngl 99 -fa 1 -ncmoe 24 -t 16 -r 1 -o md 2>>$R/lb.err | tee -a $R/llama-bench.md
fi
for be in offload hybrid; do
  budget 565 "ft bench $be" || continue
  timeout 25 "$B/ft" bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 32 -r 1 2>$R/moe_$be.err | tail -1 | tee -a $R/ft.md
  grep -h "host memory\|moe:" $R/moe_$be.err | head -3
done
if budget 540 "ft generate offload --stats"; then
  log "ft generate --stats offload 0.5 (512-token prompt, 64 tokens)"
  FT_STEP_CLOCK=1 FT_MOE_GATHER_CLOCK=1 timeout 45 "$B/ft" generate --model $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 --prompt-tokens $(seq -s, 1000 1511) \
    --max-tokens 64 --ignore-eos --temperature 0 --stats > $R/gen_offload.txt 2>&1
  grep -h "step clock\|gather timeline" $R/gen_offload.txt | cut -c1-400
  grep -E "host memory|host banks" $R/gen_offload.txt | head -2
  grep -v "^\[info\] load" $R/gen_offload.txt | tail -8
fi
if budget 480 "ft generate hybrid"; then
  log "ft generate hybrid 0.5 (512-token prompt, 64 tokens)"
  FT_STEP_CLOCK=1 timeout 45 "$B/ft" generate --model $Q --device cuda --moe-backend hybrid --moe-cache-rate 0.5 --prompt-tokens $(seq -s, 1000 1511) \
    --max-tokens 64 --ignore-eos --temperature 0 --stats > $R/gen_hybrid.txt 2>&1
  grep -h "decode [0-9]* tokens\|step clock\|warm-up:" $R/gen_hybrid.txt | sed 's/ | cuda.*//' | cut -c1-300
fi
if budget 510 "CPU rows"; then
  log "CPU rows: 15 threads, 128 experts, NVFP4 (nothing else running)"
  timeout 30 $B/ft-bench-moe-cpu --threads 15 --types nvfp4 --isas avx512 --mib 1024 --iters 60 --rounds 2 2>&1 | grep -E "host read|exact|engine" | tee -a $R/rows.txt
fi
grep -h "^PARITY" $R/parity/*.txt | sed 's/^PARITY device=cuda //' > $R/parity_lines.txt; wc -l < $R/parity_lines.txt
grep -h -A4 "Failure" $R/parity/*.txt | head -20
finish resF9
