#!/usr/bin/env bash
# Session 10, call 7: the preloaded slot cache and the start-up measurement (tests + tg128).
R=/tmp/resT
source bench/device_common.sh
log "tests (background) + model"
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 --gtest_filter='MoeTune*:MoeOffloadPreload*:*OffloadVsFused*:*HybridVsFused*:MoeBackendTokens*:MoeCpu*' > $R/test_moe.txt 2>&1; echo "test_moe rc=$?" >> $R/log.txt) &
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
wait
grep -E "tests? ran|PASSED|FAILED" $R/test_moe.txt | tail -8
run() {  # name backend [VAR=value ...]
  local name=$1 be=$2; shift 2
  env "$@" FT_X=1 timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 128 -r 3 \
    2> $R/$name.err > $R/$name.out
  log "$name: $be $* | $(tail -1 $R/$name.out | awk -F'|' '{print $(NF-3)}') | $(grep -ho '[0-9.]* us of CPU expert work' $R/$name.err | tail -1)"
  grep -h "preloaded\|measured one-token" $R/$name.err | cut -c1-400
}
run off offload
run off_np offload FT_MOE_PRELOAD=0
run hyb hybrid
run auto auto FT_MOE_AUTO_HOST=1
run h_s1f0 hybrid FT_MOE_SPEC=1 FT_MOE_HYBRID_MAX_FETCH=0
finish resT
