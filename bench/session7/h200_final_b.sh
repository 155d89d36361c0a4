#!/usr/bin/env bash
# Session 7 final device call B (the first; call A follows on the warm machine): all
# gpu-labelled tests while llama.cpp's CUDA llama-bench (pruned v0.5.0 tree, arch 90)
# built here, beside ft on the same files in the same call: Llama-8B and Qwen3-30B-A3B NVFP4
# (pp512, tg128 at depth 0 / 4k / 16k), and the experts in host RAM (llama.cpp -ncmoe 48 / 24
# beside ft's cpu / hybrid / offload).
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=/tmp/resB; mkdir -p $R $OUT
ROOT=$PWD; T0=$(date +%s)
log() { echo "[$(date -u +%T) +$(($(date +%s)-T0))s] $*" | tee -a "$R/log.txt"; }
[ -x .devcarry/bin/ft ] || tar xJf .devcarry/pack/bin.tar.xz -C .devcarry
B=$ROOT/.devcarry/bin
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64 PATH=/usr/local/cuda/bin:$PATH
W=/tmp/ft-llama; mkdir -p $W
( tar -C $W -xJf $ROOT/.devcarry/pack/llama-src.tar.xz && cd $W/llama.cpp && \
  cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF >$W/cfg.log 2>&1 && \
  nice -n 10 ninja -C build -j 14 llama-bench >$W/build.log 2>&1; echo rc=$? >$W/done ) &
log test_cuda
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 > $R/test_cuda.txt 2>&1; echo "test_cuda rc=$?")
grep -E "^\[  (FAILED|PASSED) |tests? ran|FAILED TEST" $R/test_cuda.txt | sort -u | tail -25
M=/dev/shm/m; mkdir -p $M
for p in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  [ -f $M/$p.gguf ] || timeout 120 "$B/ft-bigmodel" --preset $p -o $M/$p.gguf -q > $M/$p.info 2>&1
  grep bytes_per_token $M/$p.info
done
for p in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  log "ft bench $p"
  timeout 100 "$B/ft" bench -m $M/$p.gguf --device cuda -p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562 2>>$R/ft.err | tee -a $R/ft.md
done
grep -h "cuda memory" $R/ft.err | sort -u | head -4
log "models written; llama build: $(tail -1 $W/build.log 2>/dev/null)"
while [ ! -f $W/done ] && [ $(($(date +%s)-T0)) -lt 330 ]; do sleep 2; done
log "llama build: $(cat $W/done 2>/dev/null || echo 'not done') | $(tail -2 $W/build.log 2>/dev/null | head -c 300)"
LB=$W/llama.cpp/build/bin/llama-bench
export LD_LIBRARY_PATH=$W/llama.cpp/build/bin:$LD_LIBRARY_PATH
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
timeout 45 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 512 -n 32 -r 1 2>/dev/null | tail -2 | tee -a $R/ft.md
timeout 25 "$B/ft" bench -m $Q --device cuda --moe-backend hybrid --moe-cache-rate 0.5 -p 0 -n 32 -r 1 2>/dev/null | tail -1 | tee -a $R/ft.md
timeout 25 "$B/ft" bench -m $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 -p 0 -n 32 -r 1 2>/dev/null | tail -1 | tee -a $R/ft.md
tar czf $OUT/resB.tgz -C /tmp resB
log done
