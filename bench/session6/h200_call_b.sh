#!/usr/bin/env bash
# Session 6 final device call B: GPU parity with a freshly built test_parity (call A's was a
# stale binary of 2026-11-29), run per config in parallel; MoE cpu backend with 4 KiB vs
# huge-page host banks, offload/hybrid statistics; Qwen3.6-35B-A3B prefill (chunked default,
# the small kernel forced, the recurrence); Gemma-4-26B-A4B prefill/decode with the split-bf16
# Q8 prefill vs its alternatives. No llama.cpp build (call A's failed; figures beside llama.cpp
# are session 5's on the same presets).
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=/tmp/resB; mkdir -p $R $OUT
ROOT=$PWD; T0=$(date +%s)
log() { echo "[$(date -u +%T) +$(($(date +%s)-T0))s] $*" | tee -a "$R/log.txt"; }
[ -x .devcarry/bin/ft ] || tar xJf .devcarry/pack/bin.tar.xz -C .devcarry
B=$ROOT/.devcarry/bin
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64 PATH=/usr/local/cuda/bin:$PATH
export FT_LLAMA_LIB_DIR=$B FT_BIN_DIR=$B
M=/dev/shm/m; mkdir -p $M; Q=$M/qwen3moe-30b-nvfp4.gguf
timeout 120 "$B/ft-bigmodel" --preset qwen3moe-30b-nvfp4 -o $Q -q > $M/q.info 2>&1; grep bytes_per_token $M/q.info
log "moe cpu backend: cudaHostAlloc banks vs (tg32)"
cat /sys/kernel/mm/transparent_hugepage/enabled | tee -a $R/log.txt
timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 0 -n 32 -r 1 2>>$R/moe.err | tail -1 | tee -a $R/moe.md
timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 0 -n 32 -r 1 2>>$R/moe_huge.err | tail -1 | sed 's/^/[huge] /' | tee -a $R/moe.md
grep -h "host banks" $R/moe_huge.err | head -2
P=$(seq -s, 1000 1511)
for be in offload hybrid; do
  log "ft generate --stats $be 0.5 (512-token prompt, 128 tokens)"
  timeout 60 "$B/ft" generate --model $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 --prompt-tokens $P \
    --max-tokens 128 --ignore-eos --temperature 0 --stats > $R/gen_$be.txt 2>&1
  grep -v "^\[info\] load" $R/gen_$be.txt | tail -12
done
rm -f $Q
log parity
mkdir -p $R/parity
(cd $B && ./test_parity --gtest_list_tests --gtest_filter='Models/Parity.*' | awk '/^  /{split($1,a,"/"); print a[2]}' > $R/parity/list.txt
 cat $R/parity/list.txt | xargs -P 10 -I{} sh -c 'FT_PARITY_DEVICE=cuda FT_PARITY_MODELS=/tmp/ftp-{} timeout 200 ./test_parity --gtest_filter="Models/Parity.*/{}" > '$R'/parity/{}.txt 2>&1; echo "{} rc=$?" >> '$R'/parity/rc.txt')
log qwen35
F=$M/qwen36.gguf
timeout 120 "$B/ft-bigmodel" --preset qwen36-35b-a3b-nvfp4 -o $F -q > $M/q35.info 2>&1; grep bytes_per_token $M/q35.info
for v in 1 3 0; do
  log "qwen35 FT_GDN_CHUNKED=$v"
  FT_GDN_CHUNKED=$v timeout 70 "$B/ft" bench -m $F --device cuda -p 512,2048,8192 -n 32 -r 2 --bw-gbs 4562 2>$R/q35_$v.err | sed "s/^/[GDN=$v] /" | tee -a $R/qwen35.md
  grep -i "gated deltanet" $R/q35_$v.err | head -1
done
rm -f $F
log "ft-bench-deltanet-cuda"
timeout 40 "$B/ft-bench-deltanet-cuda" --reps 5 512 2048 8192 2>&1 | tail -20 | tee $R/deltanet_bench.txt
log gemma4
G=$M/g4.gguf
timeout 120 "$B/ft-bigmodel" --preset gemma4-26b-a4b-nvfp4 -o $G -q > $M/g4.info 2>&1; grep bytes_per_token $M/g4.info
timeout 60 "$B/ft" bench -m $G --device cuda -p 512 -n 128 -r 2 --bw-gbs 4562 2>$R/g4.err | tee -a $R/gemma4.md
grep -h "cuda memory" $R/g4.err | head -1
for v in "FT_GEMMA4_Q8_PREFILL=x2" "FT_GEMMA4_Q8_PREFILL=f32" "FT_GEMMA4_AUTO=cuda"; do
  env $v timeout 40 "$B/ft" bench -m $G --device cuda -p 512 -n 0 -r 2 2>/dev/null | tail -1 | sed "s/^/[$v] /" | tee -a $R/gemma4.md
done
rm -f $G
sort $R/parity/rc.txt | awk '{print $2}' | sort | uniq -c
grep -h "^PARITY" $R/parity/*.txt | sed 's/^PARITY device=cuda //'
grep -l "FAILED" $R/parity/*.txt | head
grep -h -A4 "Failure" $R/parity/*.txt | head -30
tar czf $OUT/resB.tgz -C /tmp resB
log done
