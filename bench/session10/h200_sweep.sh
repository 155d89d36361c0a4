#!/usr/bin/env bash
# Session 10, call 5: hybrid's speculation (FT_MOE_SPEC) x fetch cap (FT_MOE_HYBRID_MAX_FETCH)
# at rate 0.5 in the steady state (tg128, 3 reps: the LRU fills within the first rep), beside
# offload and cpu in the same call.
R=/tmp/resW
source bench/device_common.sh
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
run() {  # name backend [VAR=value ...]
  local name=$1 be=$2; shift 2
  env "$@" FT_X=1 timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 128 -r 3 \
    2> $R/$name.err > $R/$name.out
  log "$name: $be $* | $(tail -1 $R/$name.out | awk -F'|' '{print $(NF-3)}') | $(grep -ho '[0-9.]* us of CPU expert work' $R/$name.err)"
  grep -h "layer clock" $R/$name.err | sed 's/.*FT_MOE_CLOCK)://'
}
run off offload
run h_s2f0 hybrid
run h_s0f1 hybrid FT_MOE_SPEC=0 FT_MOE_HYBRID_MAX_FETCH=1
run h_s0f2 hybrid FT_MOE_SPEC=0 FT_MOE_HYBRID_MAX_FETCH=2
run h_s1f0 hybrid FT_MOE_SPEC=1 FT_MOE_HYBRID_MAX_FETCH=0
run h_s1f1 hybrid FT_MOE_SPEC=1 FT_MOE_HYBRID_MAX_FETCH=1
run h_s2f1 hybrid FT_MOE_SPEC=2 FT_MOE_HYBRID_MAX_FETCH=1
run cpu cpu
run h_s0f1c hybrid FT_MOE_SPEC=0 FT_MOE_HYBRID_MAX_FETCH=1 FT_MOE_CLOCK=1
run h_s0f1w0 hybrid FT_MOE_SPEC=0 FT_MOE_HYBRID_MAX_FETCH=1 FT_MOE_CPU_WARM_KIB=0
run off2 offload
finish resW
