#!/usr/bin/env bash
# Session 10, final call: the whole test_cuda and test_moe_cpu, then the MoE backends at
# rate 0.5 on the Qwen3-30B-A3B-shaped NVFP4 file (tg128, 3 reps), the start-up measurement,
# the layer clock, ft generate, and the CPU rows.
R=/tmp/resF
source bench/device_common.sh
log "model (background) + tests"
( model qwen3moe-30b-nvfp4 > $R/model.txt 2>&1 ) &
(cd $B && timeout 220 ./test_cuda --gtest_brief=1 > $R/test_cuda.txt 2>&1; echo "test_cuda rc=$?" >> $R/log.txt)
grep -E "tests? ran|PASSED|FAILED|SKIPPED \[" $R/test_cuda.txt | tail -12
(cd $B && timeout 60 ./test_moe_cpu --gtest_brief=1 > $R/test_moe_cpu.txt 2>&1; echo "test_moe_cpu rc=$?" >> $R/log.txt)
grep -E "tests? ran|PASSED|FAILED" $R/test_moe_cpu.txt | tail -4
wait
Q=$M/qwen3moe-30b-nvfp4.gguf
run() {  # name backend [VAR=value ...]
  local name=$1 be=$2; shift 2
  env "$@" FT_X=1 timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 128 -r 3 \
    2> $R/$name.err > $R/$name.out
  log "$name: $be $* | $(tail -1 $R/$name.out | awk -F'|' '{print $(NF-3)}') | $(grep -ho '[0-9.]* us of CPU expert work' $R/$name.err | tail -1)"
  grep -h "measured one-token\|layer clock" $R/$name.err | sed 's/.*FT_MOE_CLOCK)://' | cut -c1-420
}
run off offload
run hyb hybrid
run auto auto FT_MOE_AUTO_HOST=1
run cpu cpu
run hyb_formula hybrid FT_MOE_TUNE=0
run hyb_clk hybrid FT_MOE_SPEC=1 FT_MOE_HYBRID_MAX_FETCH=0 FT_MOE_CLOCK=1
for be in offload hybrid; do
  log "generate $be, 512-token prompt, 64 tokens"
  timeout 60 "$B/ft" generate --model $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 --prompt-tokens $(seq -s, 1000 1511) \
    --max-tokens 64 --ignore-eos --temperature 0 --stats > $R/gen_$be.txt 2>&1
  grep -h "decode\|prefill" $R/gen_$be.txt | grep -v "^\[info\]" | tail -3 | cut -c1-200
done
log "CPU rows: 15 threads, 128 experts"
$B/ft-bench-moe-cpu --threads 15 --types nvfp4 --isas avx512 --mib 1024 --iters 60 --rounds 2 2>&1 | grep -E "host read|exact" | tee -a $R/rows.txt
finish resF
