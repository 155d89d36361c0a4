#!/usr/bin/env bash
# Session 7 extra device call (after the final A/B, binaries of 5b4afbd): the cpu backend's
# decode repeated with the items schedule (da5ce2e's default), hybrid's fetch cap swept
# against offload with speculation, in one process order; Qwen3.6 / Gemma-4 decode for the
# README's status line.
set -uo pipefail
OUT=${OUT:-/tmp/out}; R=/tmp/resX; mkdir -p $R $OUT
ROOT=$PWD; T0=$(date +%s)
log() { echo "[$(date -u +%T) +$(($(date +%s)-T0))s] $*" | tee -a "$R/log.txt"; }
[ -x .devcarry/bin/ft ] || tar xJf .devcarry/pack/bin.tar.xz -C .devcarry
B=$ROOT/.devcarry/bin
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64
M=/dev/shm/m; mkdir -p $M; Q=$M/qwen3moe-30b-nvfp4.gguf
[ -f $Q ] || timeout 120 "$B/ft-bigmodel" --preset qwen3moe-30b-nvfp4 -o $Q -q > $M/q.info 2>&1
tg() { timeout 40 "$B/ft" bench -m $Q --device cuda -p 0 -n 32 -r 1 "$@" 2>/dev/null | tail -1 | sed 's/^.*| tg32/tg32/'; }
log "cpu items x2, offload, hybrid max-fetch 0..4"
for i in 1 2; do echo "[cpu items $i] $(FT_MOE_CPU_SCHED=items tg --moe-backend cpu)"; done | tee -a $R/moe.md
echo "[offload 0.5] $(tg --moe-backend offload --moe-cache-rate 0.5)" | tee -a $R/moe.md
for f in 0 1 2 3 4; do echo "[hybrid 0.5 max-fetch $f] $(tg --moe-backend hybrid --moe-cache-rate 0.5 --moe-hybrid-max-fetch $f)"; done | tee -a $R/moe.md
rm -f $Q
for pr in qwen36-35b-a3b-nvfp4 gemma4-26b-a4b-nvfp4; do
  [ $(($(date +%s)-T0)) -lt 250 ] || break
  F=$M/$pr.gguf
  timeout 90 "$B/ft-bigmodel" --preset $pr -o $F -q > $M/$pr.info 2>&1
  log "ft bench $pr"
  timeout 45 "$B/ft" bench -m $F --device cuda -p 512 -n 128 -r 2 --bw-gbs 4562 2>/dev/null | tail -2 | tee -a $R/bench.md
  rm -f $F
done
tar czf $OUT/resX.tgz -C /tmp resX
log done
