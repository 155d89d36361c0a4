#!/usr/bin/env bash
# Session 10, call 10: the CPU hand-off of hybrid and cpu with the clocks related
# (FT_MOE_CLOCK=1 now calibrates %globaltimer against the host's realtime clock).
R=/tmp/resO
source bench/device_common.sh
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
run() {  # name backend [VAR=value ...]
  local name=$1 be=$2; shift 2
  env "$@" FT_MOE_CLOCK=1 timeout 40 "$B/ft" bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 64 -r 1 \
    2> $R/$name.err > $R/$name.out
  log "$name: $be $* | $(tail -1 $R/$name.out | awk -F'|' '{print $(NF-3)}')"
  grep -h "layer clock" $R/$name.err | sed 's/.*FT_MOE_CLOCK)://'
}
run h20 hybrid FT_MOE_SPEC=2 FT_MOE_HYBRID_MAX_FETCH=0
run h10 hybrid FT_MOE_SPEC=1 FT_MOE_HYBRID_MAX_FETCH=0
run h01 hybrid FT_MOE_SPEC=0 FT_MOE_HYBRID_MAX_FETCH=1
run cpu cpu
finish resO
