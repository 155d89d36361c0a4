#!/usr/bin/env bash
# Session 7, offload (issue 4): ensure variants, overlap, pre-gating, speculation, pp8192 on the
# H200 -- the call behind benches/h200.md "Session 7: offload overlap and pp8192". Binaries of a
# clean tree of commit 7327181 (git archive, built with -DFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90:
# ft, test_cuda, ft-bench-moe-cache, ft-bigmodel + their non-system libraries) packed into
# .devcarry/offload/bin.tar.xz; run(command="bash .devcarry/offload/run.sh",
# carry=[".devcarry/offload"], timeout_s=200) with this file as .devcarry/offload/run.sh. At
# 7327181 speculation, the overlap and the ensure in registers were opt-in (FT_MOE_SPEC,
# FT_MOE_OFFLOAD_OVERLAP, FT_MOE_ENSURE_REGS=1); a09e5ed made speculation (2) and the registers
# the defaults, so `base` below needs FT_MOE_SPEC=0 FT_MOE_ENSURE_REGS=0 on later binaries.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
exec > >(tee -a $OUT/console.txt) 2>&1
T0=$(date +%s)
log() { echo "[$(date -u +%T) +$(($(date +%s)-T0))s] $*" | tee -a $OUT/log.txt; }
mkdir -p /tmp/b && tar xJf .devcarry/offload/bin.tar.xz -C /tmp/b
export LD_LIBRARY_PATH=/tmp/b:/usr/local/cuda/lib64
# Binaries of a clean tree of commit 7327181. The L2 prefetch (e020a64, not yet run on a
# device) off but for one run: this call measures the offload changes on session 6's paths.
export FT_L2_PREFETCH=0
B=/tmp/b
M=/dev/shm/m; mkdir -p $M; Q=$M/q30.gguf
log "start; model generation in the background"
(timeout 100 $B/ft-bigmodel --preset qwen3moe-30b-nvfp4 -o $Q -q > $M/q.info 2>&1; echo "bigmodel rc=$?" >> $M/q.info) &
GEN=$!
log "test_cuda subset"
(cd $B && timeout 90 ./test_cuda --gtest_filter='MoeCache*:*OffloadVsFused*:MoeOffload*' > $OUT/tests.txt 2>&1; echo "test_cuda rc=$?" >> $OUT/tests.txt)
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|rc=|OFFLOAD .*(overlap|spec)|pre-gating|speculative" $OUT/tests.txt | head -60
grep -B2 -A6 "Failure" $OUT/tests.txt | head -40
wait $GEN; cat $M/q.info | tail -3
log "ft-bench-moe-cache 3072, ensure variants"
for v in 0 1; do
  FT_MOE_ENSURE_REGS=$v timeout 25 $B/ft-bench-moe-cache 3072 > $OUT/bmc_$v.txt 2>&1
  echo "--- FT_MOE_ENSURE_REGS=$v"; grep -E "pinned|ensure|^ +(1|2|4|8|16|32) " $OUT/bmc_$v.txt
done
FT_MOE_GATHER_INFLIGHT=8 timeout 25 $B/ft-bench-moe-cache 3072 > $OUT/bmc_inflight8.txt 2>&1
echo "--- FT_MOE_GATHER_INFLIGHT=8"; grep -E "^ +(1|2|4|8|16|32) " $OUT/bmc_inflight8.txt
P=$(seq -s, 1000 1511)
gen() {  # label, env...
  local label=$1; shift
  log "generate offload 0.5 [$label]"
  env "$@" timeout 40 $B/ft generate --model $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 \
    --prompt-tokens $P --max-tokens 128 --ignore-eos --temperature 0 --stats > $OUT/gen_$label.txt 2>&1
  echo "rc=$?"; grep -iE "moe backend|offload \(|error" $OUT/gen_$label.txt | head -3
  grep -v -E "^ +[0-9]+ +[0-9]+ |^\[info\] load" $OUT/gen_$label.txt | tail -9
}
gen base FT_MOE_ENSURE_REGS=0 FT_MOE_OFFLOAD_OVERLAP=0
gen regs_overlap FT_MOE_ENSURE_REGS=1 FT_MOE_OFFLOAD_OVERLAP=1
gen pregate FT_MOE_PREGATE=1
log "pp8192, all experts in host RAM"
timeout 45 $B/ft bench -m $Q --device cuda --moe-backend cpu -p 8192 -n 0 -r 1 2> $OUT/pp_cpu.err | tail -2
grep -iE "error" $OUT/pp_cpu.err | head -3
timeout 45 $B/ft bench -m $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 -p 8192 -n 0 -r 1 2> $OUT/pp_off.err | tail -1
gen spec1 FT_MOE_ENSURE_REGS=1 FT_MOE_SPEC=1
gen spec2 FT_MOE_ENSURE_REGS=1 FT_MOE_SPEC=2
FT_CUDA_UBATCH=8192 timeout 45 $B/ft bench -m $Q --device cuda --moe-backend cpu -p 8192 -n 0 -r 1 2> $OUT/pp_cpu_ub.err | tail -1 | sed 's/^/[ubatch 8192] /'
grep -iE "error" $OUT/pp_cpu_ub.err | head -3
gen regs FT_MOE_ENSURE_REGS=1 FT_MOE_OFFLOAD_OVERLAP=0
gen overlap FT_MOE_ENSURE_REGS=0 FT_MOE_OFFLOAD_OVERLAP=1
log "ft bench tg32 offload 0.5"
for v in "0 0" "1 1"; do set -- $v
  FT_MOE_ENSURE_REGS=$1 FT_MOE_OFFLOAD_OVERLAP=$2 timeout 40 $B/ft bench -m $Q --device cuda --moe-backend offload \
    --moe-cache-rate 0.5 -p 0 -n 32 -r 1 2>/dev/null | tail -1 | sed "s/^/[regs $1 overlap $2] /"
done
gen inflight8 FT_MOE_ENSURE_REGS=1 FT_MOE_OFFLOAD_OVERLAP=1 FT_MOE_GATHER_INFLIGHT=8
gen base_l2 FT_MOE_ENSURE_REGS=0 FT_MOE_OFFLOAD_OVERLAP=0 FT_L2_PREFETCH=1
log "test_cuda gather + MoE backends with the candidate defaults (overlap, ensure in registers, 8 loads in flight): offload on gemma4 / qwen35moe too"
(cd $B && FT_MOE_OFFLOAD_OVERLAP=1 FT_MOE_ENSURE_REGS=1 FT_MOE_GATHER_INFLIGHT=8 timeout 70 ./test_cuda --gtest_filter='MoeCache.Gather*:*MoeBackendTokens*:*Gemma4MoeBackends*:*Qwen35MoeBackends*' > $OUT/tests2.txt 2>&1; echo "test_cuda rc=$?" >> $OUT/tests2.txt)
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|rc=" $OUT/tests2.txt | head -20
log done
