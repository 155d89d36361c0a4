#!/usr/bin/env bash
# Session 8 final device call B (the first): all gpu-labelled tests while llama.cpp's CUDA
# llama-bench builds here; then ft beside llama.cpp on the same files in the same call:
# Llama-8B and Qwen3-30B-A3B NVFP4 (pp512, tg128 at depth 0 / 4k / 16k), and the experts in
# host RAM (llama.cpp -ncmoe 48 / 24 beside ft's cpu / hybrid / offload), with the load
# reports of GPU and host memory.
R=/tmp/resB
source bench/device_common.sh
llama_build_bg
log test_cuda
(cd $B && timeout 330 ./test_cuda --gtest_brief=1 > $R/test_cuda.txt 2>&1; echo "test_cuda rc=$?")
grep -E "^\[  (FAILED|PASSED) |tests? ran|FAILED TEST" $R/test_cuda.txt | sort -u | tail -25
for p in llama8b-nvfp4 qwen3moe-30b-nvfp4; do model $p; done
for p in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  log "ft bench $p"
  timeout 100 "$B/ft" bench -m $M/$p.gguf --device cuda -p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562 2>>$R/ft.err | tee -a $R/ft.md
done
grep -h "cuda memory\|host memory" $R/ft.err | sort -u | head -4
llama_wait 400
Q=$M/qwen3moe-30b-nvfp4.gguf
if [ -x $LB ]; then
  for p in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
    log "llama-bench $p"
    timeout 60 $LB -m $M/$p.gguf -p 512 -n 128 -ngl 99 -fa 1 -r 2 -o md 2>>$R/lb.err | tee -a $R/llama-bench.md
  done
  log "llama-bench -ncmoe 48 (all experts on the CPU), 16 threads"
  timeout 70 $LB -m $Q -p 512 -n 32 -ngl 99 -fa 1 -ncmoe 48 -t 16 -r 1 -o md 2>>$R/lb.err | tee -a $R/llama-bench.md
  log "llama-bench -ncmoe 24 (half)"
  timeout 30 $LB -m $Q -p 0 -n 32 -ngl 99 -fa 1 -ncmoe 24 -t 16 -r 1 -o md 2>>$R/lb.err | tee -a $R/llama-bench.md
fi
log "ft moe backends (same call)"
timeout 70 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 512 -n 32 -r 2 2>$R/moe_cpu.err | tail -2 | tee -a $R/ft.md
grep -h "host memory\|cuda memory\|moe:" $R/moe_cpu.err | head -4
for be in hybrid offload; do
  timeout 45 "$B/ft" bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 32 -r 2 2>$R/moe_$be.err | tail -1 | tee -a $R/ft.md
  grep -h "host memory\|cuda memory\|moe:" $R/moe_$be.err | head -4
done
finish resB
