#!/usr/bin/env bash
# Session 10, call 1: session 9's untested GPU tests, then where hybrid's CPU share loses:
# the CPU rows alone at 8 / 3 / 2 routes (fixed cost of a task), and hybrid tg32 with the CPU
# profile at speculation 0 / 2 / 3 / 4 beside offload and cpu at the same cache rate.
R=/tmp/resP
source bench/device_common.sh
log "tests (background) + model"
(cd $B && timeout 170 ./test_cuda --gtest_brief=1 --gtest_filter='MoeCpu*:MoeBackendTokens*:*HybridVsFused*:*OffloadVsFused*' > $R/test_moe.txt 2>&1; echo "test_moe rc=$?" >> $R/log.txt) &
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
wait
grep -E "tests? ran|PASSED|FAILED" $R/test_moe.txt | tail -8
for u in 8 3 2 1; do
  log "CPU rows alone, 15 threads, 128 experts, n_used $u"
  $B/ft-bench-moe-cpu --threads 15 --types nvfp4 --isas avx512 --mib 1024 --iters 200 --rounds 2 --n-used $u 2>&1 | grep -E "host read|exact" | tee -a $R/rows.txt
done
run() {  # name backend [VAR=value ...]
  local name=$1 be=$2; shift 2
  log "$name: $be $*"
  env "$@" FT_MOE_CPU_PROFILE=1 timeout 45 "$B/ft" bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 32 -r 2 \
    2> $R/$name.err | tail -1 | sed 's/(CPU experts.*MiB)//' | cut -c1-100,300-500 | tee -a $R/ft.md
  grep -h "us of CPU expert work\|moe cpu executor\|hit rate\|routes" $R/$name.err | cut -c1-300 | tail -4
}
run offload offload
run hyb_s2 hybrid
run hyb_s0 hybrid FT_MOE_SPEC=0 FT_MOE_HYBRID_MAX_FETCH=0
run hyb_s3 hybrid FT_MOE_SPEC=3
run hyb_s4 hybrid FT_MOE_SPEC=4
run cpu05 cpu
run hyb_s2w0 hybrid FT_MOE_CPU_WARM_KIB=0
finish resP
