#!/usr/bin/env bash
# Session 8, offload (issue 4): hybrid speculation and offload gaps on the H200 -- the call
# behind benches/h200.md "Session 8: hybrid speculation and offload gaps". Binaries built here
# (build-offload, -DCMAKE_CUDA_ARCHITECTURES=90: ft, test_cuda, ft-bench-moe-cache, ft-bigmodel
# + their non-system libraries) in .devcarry/offload/bin.tar.xz; run(command="bash
# .devcarry/offload/run.sh", carry=[".devcarry/offload"], timeout_s=180).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee -a $OUT/console.txt) 2>&1
T0=$(date +%s)
log() { echo "[$(date -u +%T) +$(($(date +%s)-T0))s] $*"; }
mkdir -p /tmp/b && tar xJf .devcarry/offload/bin.tar.xz -C /tmp/b
export LD_LIBRARY_PATH=/tmp/b:/usr/local/cuda/lib64
B=/tmp/b
M=/dev/shm/m; mkdir -p $M; Q=$M/q30.gguf
log "start; model generation in the background"
(timeout 100 $B/ft-bigmodel --preset qwen3moe-30b-nvfp4 -o $Q -q > $M/q.info 2>&1; echo "bigmodel rc=$?" >> $M/q.info) &
GEN=$!
log "test_cuda subset"
(cd $B && timeout 80 ./test_cuda --gtest_filter='MoeCache*:*OffloadVsFused*:*MoeBackendTokens*:MoeOffload*:*Hybrid*:*MoeBackends*:MoeCpuBackends*' > $OUT/tests.txt 2>&1; echo "test_cuda rc=$?" >> $OUT/tests.txt)
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|rc=" $OUT/tests.txt | head -30
grep -B3 -A8 "Failure" $OUT/tests.txt | head -40
grep -E "^HYBRID|OFFLOAD .*(from|late)" $OUT/tests.txt | head -12
log "ft-bench-moe-cache 3072 (model still being written: host memory busy)"
timeout 20 $B/ft-bench-moe-cache 3072 > $OUT/bmc.txt 2>&1; grep -E "pinned|misses|^ +(1|2|4|8|16|32) " $OUT/bmc.txt
# The flat gather (all kinds of a miss in one index space) for the runs below when it beat the
# per-kind loop by 2% or more at 2 misses (a layer's typical demand gather); the other once.
FLAT=$(awk '$1 == 2 && NF >= 8 { print ($8 >= 1.02 * $3) ? 1 : 0 }' $OUT/bmc.txt); FLAT=${FLAT:-0}
NOFLAT=$((1 - FLAT)); export FT_MOE_GATHER_FLAT=$FLAT; log "FT_MOE_GATHER_FLAT=$FLAT for the runs below"
wait $GEN; tail -3 $M/q.info
P=$(seq -s, 1000 1511)
gen() {  # label backend env...
  local label=$1 be=$2; shift 2
  log "generate $be 0.5 [$label]"
  env "$@" timeout 30 $B/ft generate --model $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 \
    --prompt-tokens $P --max-tokens 128 --ignore-eos --temperature 0 --stats > $OUT/gen_$label.txt 2>&1
  echo "rc=$?"; grep -E "offload \(|hybrid \(|cpu \(" $OUT/gen_$label.txt | head -1 | cut -c1-400
  grep -iE "tok/s|^ +all |per decode step|speculative|gather timeline|rror" $OUT/gen_$label.txt | cut -c1-600
}
bench() {  # label backend env...
  local label=$1 be=$2; shift 2
  env "$@" timeout 30 $B/ft bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 32 -r 1 \
    2> $OUT/bench_$label.err | tail -1 | sed "s/^/[$label] /"
  grep -iE "rror" $OUT/bench_$label.err | head -2
}
gen off offload
gen hyb hybrid
gen hyb_spec0 hybrid FT_MOE_SPEC=0
gen off_late offload FT_MOE_SPEC_EARLY=0
gen cpu cpu
gen off_clock offload FT_MOE_GATHER_CLOCK=1
log "ft bench tg32"
bench off offload
bench hyb hybrid
bench hyb_f1 hybrid FT_MOE_HYBRID_MAX_FETCH=1
bench hyb_spec0 hybrid FT_MOE_SPEC=0
gen off_flat$NOFLAT offload FT_MOE_GATHER_FLAT=$NOFLAT
bench hyb_f2 hybrid FT_MOE_HYBRID_MAX_FETCH=2
gen hyb_f1 hybrid FT_MOE_HYBRID_MAX_FETCH=1
gen off_out offload FT_MOE_SPEC_FROM=out
gen off_k3 offload FT_MOE_SPEC=3
gen hyb_clock hybrid FT_MOE_GATHER_CLOCK=1
bench hyb_k3 hybrid FT_MOE_SPEC=3
log done
