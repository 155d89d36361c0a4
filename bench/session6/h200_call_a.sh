#!/usr/bin/env bash
# Session 6 final device call A (call B follows on the warm machine): llama.cpp's CUDA
# llama-bench build in the background (setsid, outlives this call), the gpu tests + GPU parity
# + test_moe_cpu, ft bench on the Llama-8B / Qwen3-30B-A3B files, and the MoE backends.
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=/tmp/resA; mkdir -p $R $OUT
ROOT=$PWD; T0=$(date +%s)
log() { echo "[$(date -u +%T) +$(($(date +%s)-T0))s] $*" | tee -a "$R/log.txt"; }
tar xJf .devcarry/pack/bin.tar.xz -C .devcarry
B=$ROOT/.devcarry/bin
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64 PATH=/usr/local/cuda/bin:$PATH
W=/tmp/ft-llama; mkdir -p $W
if [ ! -f $W/started ]; then
  touch $W/started
  setsid bash -c "tar -C $W -xJf $ROOT/.devcarry/pack/llama-src.tar.xz && cd $W/llama.cpp && \
    cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >$W/cfg.log 2>&1 && \
    nice -n 19 ninja -C build -j 12 llama-bench >$W/build.log 2>&1; echo rc=\$? >$W/done" \
    </dev/null >/dev/null 2>&1 &
  log "llama.cpp build started"
fi
lscpu | grep -E "Model name|Flags" | cut -c1-300 | tee -a $R/log.txt
log tests
OUT=$R timeout 330 bash scripts/device-test.sh > "$R/tests.txt" 2>&1
tail -45 "$R/tests.txt"
log test_moe_cpu
(cd $B && timeout 60 ./test_moe_cpu --gtest_brief=1 > $R/test_moe_cpu.txt 2>&1; echo "test_moe_cpu rc=$?"; grep -E "^\[  (FAILED|PASSED|SKIPPED) " $R/test_moe_cpu.txt | sort -u | tail -15)
log "huge-page host banks: offload / cpu / hybrid tokens vs fused (FT_MOE_BANK_PAGES=huge)"
(cd $B && timeout 90 ./test_cuda --gtest_brief=1 --gtest_filter='*OffloadVsFused*:*MoeBackendTokens*' > $R/huge_banks.txt 2>&1; echo "huge banks rc=$?"; grep -E "^\[  (FAILED|PASSED) " $R/huge_banks.txt | sort -u | tail -8)
M=/dev/shm/m; mkdir -p $M
for p in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  [ -f $M/$p.gguf ] || timeout 120 "$B/ft-bigmodel" --preset $p -o $M/$p.gguf > $M/$p.info 2>&1
  grep bytes_per_token $M/$p.info | tee -a $R/log.txt
done
for p in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  log "ft bench $p"
  timeout 100 "$B/ft" bench -m $M/$p.gguf --device cuda -p 512 -n 128 -d 0,4096,16384 --bw-gbs 4562 2>>$R/log.txt | tee -a $R/bench.md
done
grep -h "cuda memory" $R/log.txt | sort -u | head
log "llama build: $(cat $W/done 2>/dev/null || echo running) | $(tail -1 $W/build.log 2>/dev/null)"
tar czf $OUT/resA.tgz -C /tmp resA
log done
