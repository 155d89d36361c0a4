#!/usr/bin/env bash
# Session 10, call 4: where a hybrid / cpu decode layer goes (FT_MOE_CLOCK=1 stamps), tg32
# with and without the clock, rate 0.5.
R=/tmp/resC
source bench/device_common.sh
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
run() {  # name backend [VAR=value ...]
  local name=$1 be=$2; shift 2
  env "$@" FT_X=1 timeout 45 "$B/ft" bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 32 -r 2 \
    2> $R/$name.err > $R/$name.out
  log "$name: $be $* | $(tail -1 $R/$name.out | awk -F'|' '{print $(NF-3)}') | $(grep -ho '[0-9.]* us of CPU expert work' $R/$name.err)"
  grep -h "layer clock" $R/$name.err | sed 's/.*FT_MOE_CLOCK)://'
}
run hyb hybrid
run hyb_clk hybrid FT_MOE_CLOCK=1
run cpu cpu
run cpu_clk cpu FT_MOE_CLOCK=1
run hyb_w0_clk hybrid FT_MOE_CLOCK=1 FT_MOE_CPU_WARM_KIB=0
run hyb_s0f1_clk hybrid FT_MOE_CLOCK=1 FT_MOE_SPEC=0 FT_MOE_HYBRID_MAX_FETCH=1
run off offload
finish resC
