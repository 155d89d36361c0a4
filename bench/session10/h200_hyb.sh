#!/usr/bin/env bash
# Session 10, call 2 (warm, after h200_probe.sh): hybrid tg32 at speculation 2 / 3 / 4 / 6 and
# fetch caps, beside offload, at cache rate 0.5; the tok/s column only.
R=/tmp/resH
source bench/device_common.sh
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
run() {  # name backend [VAR=value ...]
  local name=$1 be=$2; shift 2
  env "$@" FT_MOE_CPU_PROFILE=1 timeout 45 "$B/ft" bench -m $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 -p 0 -n 32 -r 2 \
    2> $R/$name.err > $R/$name.out
  log "$name: $be $* | $(tail -1 $R/$name.out | awk -F'|' '{print $(NF-3), $(NF-2)}') | $(grep -ho '[0-9.]* us of CPU expert work' $R/$name.err)"
}
for rep in 1 2; do
run offload offload
run hyb_s2 hybrid
run hyb_s3 hybrid FT_MOE_SPEC=3
run hyb_s4 hybrid FT_MOE_SPEC=4
done
run hyb_s6 hybrid FT_MOE_SPEC=6
run hyb_s3f1 hybrid FT_MOE_SPEC=3 FT_MOE_HYBRID_MAX_FETCH=1
run hyb_s4f1 hybrid FT_MOE_SPEC=4 FT_MOE_HYBRID_MAX_FETCH=1
run off_s3 offload FT_MOE_SPEC=3
finish resH
