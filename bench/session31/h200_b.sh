#!/usr/bin/env bash
# Session 31, call 5: where a decode step goes now, link by link (FT_DEBUG_SKIP: each named launch left out
# of the decode chain; tokens are garbage, the time is the link's share of the step with PDL's overlap), with
# the key bound of calls 1-4 in place; and the refactored attention graph tests. tg128 -p 0 --ctx-size 4096,
# 2 rounds alternating.
R=/tmp/resb
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
gpu_tests 100 'CudaAttention.*:CudaAttentionPlan.*'
models_wait
skips_l="- norm1 norm2 norm1,norm2 qkv attn wo gateup down"
skips_q="- norm1 qkv attn wo router experts norm1,router"
for round in 1 2; do
  for f in $L $Q; do
    [ "$f" = "$L" ] && skips=$skips_l || skips=$skips_q
    for sk in $skips; do
      budget 420 "skip $sk $(basename "$f")" || break 3
      log "FT_DEBUG_SKIP=$sk round $round $(basename "$f")"
      FT_DEBUG_SKIP=${sk/#-/} timeout 60 "$B/ft" bench -m "$f" --device cuda -p 0 -n 128 -r 2 --ctx-size 4096 \
        --bw-gbs 4562 2>>"$R/ft.err" | rows | sed "s/ | cuda (NVIDIA[^|]*//;s/\$/ skip $sk/" | tee -a "$R/ft.md"
    done
  done
done
finish resb
