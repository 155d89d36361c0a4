#!/usr/bin/env bash
# Session 10, call 6: FT_MOE_CLOCK with the CPU's side (realtime seen / done against
# %globaltimer) for hybrid s2f0 / s1f0 / s0f1 and cpu, rate 0.5, tg64.
R=/tmp/resK
source bench/device_common.sh
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
run() {  # name backend [VAR=value ...]
  local name=$1 be=$2; shift 2
  env "$@" FT_MOE_CLOCK=1 timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 64 -r 2 \
    2> $R/$name.err > $R/$name.out
  log "$name: $be $* | $(tail -1 $R/$name.out | awk -F'|' '{print $(NF-3)}') | $(grep -ho '[0-9.]* us of CPU expert work' $R/$name.err)"
  grep -h "layer clock" $R/$name.err | sed 's/.*FT_MOE_CLOCK)://'
}
run h_s2f0 hybrid
run h_s1f0 hybrid FT_MOE_SPEC=1 FT_MOE_HYBRID_MAX_FETCH=0
run h_s0f1 hybrid FT_MOE_SPEC=0 FT_MOE_HYBRID_MAX_FETCH=1
run cpu cpu
run h_s1f0w0 hybrid FT_MOE_SPEC=1 FT_MOE_HYBRID_MAX_FETCH=0 FT_MOE_CPU_WARM_KIB=0
finish resK
