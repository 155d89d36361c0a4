#!/usr/bin/env bash
# Session 7 final device call A (after call B, on the warm machine): GPU parity per config
# (fresh test_parity, 10 configs at a time), test_moe_cpu on the Xeon host, offload/hybrid
# statistics with a 512-token prompt (speculative fetches 2 / 3 / 4), pp8192 with the experts
# in host RAM (micro-batch 4096 and 512), the chunked DeltaNet kernel's speed.
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=/tmp/resA; mkdir -p $R $OUT
ROOT=$PWD; T0=$(date +%s)
log() { echo "[$(date -u +%T) +$(($(date +%s)-T0))s] $*" | tee -a "$R/log.txt"; }
[ -x .devcarry/bin/ft ] || tar xJf .devcarry/pack/bin.tar.xz -C .devcarry
B=$ROOT/.devcarry/bin
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64 PATH=/usr/local/cuda/bin:$PATH
export FT_LLAMA_LIB_DIR=$B FT_BIN_DIR=$B
nvidia-smi -L
log parity
mkdir -p $R/parity
(cd $B && ./test_parity --gtest_list_tests --gtest_filter='Models/Parity.*' | awk '/^  /{split($1,a,"/"); print a[2]}' > $R/parity/list.txt
 cat $R/parity/list.txt | xargs -P 10 -I{} sh -c 'FT_PARITY_DEVICE=cuda FT_PARITY_MODELS=/tmp/ftp-{} timeout 200 ./test_parity --gtest_filter="Models/Parity.*/{}" > '$R'/parity/{}.txt 2>&1; echo "{} rc=$?" >> '$R'/parity/rc.txt')
awk '{print $2}' $R/parity/rc.txt | sort | uniq -c
grep -l "FAILED" $R/parity/*.txt | head
log test_moe_cpu
(cd $B && timeout 60 ./test_moe_cpu --gtest_brief=1 > $R/test_moe_cpu.txt 2>&1; echo "test_moe_cpu rc=$?"; grep -E "tests? ran|PASSED|FAILED" $R/test_moe_cpu.txt | tail -4)
M=/dev/shm/m; mkdir -p $M; Q=$M/qwen3moe-30b-nvfp4.gguf
timeout 120 "$B/ft-bigmodel" --preset qwen3moe-30b-nvfp4 -o $Q -q > $M/q.info 2>&1; grep bytes_per_token $M/q.info
P=$(seq -s, 1000 1511)
for be in offload hybrid; do
  log "ft generate --stats $be 0.5 (512-token prompt, 128 tokens)"
  timeout 70 "$B/ft" generate --model $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 --prompt-tokens $P \
    --max-tokens 128 --ignore-eos --temperature 0 --stats > $R/gen_$be.txt 2>&1
  grep -v "^\[info\] load" $R/gen_$be.txt | tail -8
done
for k in 3 4; do
  log "offload with speculative fetches FT_MOE_SPEC=$k"
  FT_MOE_SPEC=$k timeout 70 "$B/ft" generate --model $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 --prompt-tokens $P \
    --max-tokens 128 --ignore-eos --temperature 0 --stats > $R/gen_offload_spec$k.txt 2>&1
  grep -v "^\[info\] load" $R/gen_offload_spec$k.txt | grep -iE "decode|fetch|spec|tok/s" | head -6
done
for sch in guided items; do
  log "cpu backend tg32, FT_MOE_CPU_SCHED=$sch"
  FT_MOE_CPU_SCHED=$sch timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 0 -n 32 -r 1 2>/dev/null | tail -1 | sed "s/^.*| tg32/[$sch] tg32/" | tee -a $R/moe.md
done
log "pp8192 with the experts in host RAM"
timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 512,8192 -n 0 -r 1 2>$R/pp8k.err | tail -2 | tee -a $R/moe.md
timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 -p 8192 -n 0 -r 1 2>>$R/pp8k.err | tail -1 | tee -a $R/moe.md
timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend cpu --ubatch-size 512 -p 8192 -n 0 -r 1 2>>$R/pp8k.err | tail -1 | sed 's/^/[ubatch 512] /' | tee -a $R/moe.md
grep -h "micro-batch\|cuda memory" $R/pp8k.err | sort -u | head -4
rm -f $Q
log "ft-bench-deltanet-cuda (shared phases header since 3f2699d: same speed as session 6?)"
timeout 40 "$B/ft-bench-deltanet-cuda" --reps 5 512 2048 8192 2>&1 | tail -12 | tee $R/deltanet_bench.txt
grep -h "^PARITY" $R/parity/*.txt | sed 's/^PARITY device=cuda //' > $R/parity_lines.txt; wc -l < $R/parity_lines.txt
grep -h -A4 "Failure" $R/parity/*.txt | head -30
tar czf $OUT/resA.tgz -C /tmp resA
log done
