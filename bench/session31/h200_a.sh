#!/usr/bin/env bash
# Session 31, call 1: why ft's decode ran 2-3% slower after a prefill in the same process (session 30
# calls 8-9). Suspect: ft bench sizes the cache from the longest test (-p 512 -n 128: n_ctx 512;
# -p 0: 129), and the decode attention's grid from n_ctx -- 16 chunks a head at 512 where at most 2
# are live below 256 keys. New: a key bound for the one-token graphs below the tensor-core kernel's
# depth (cuda::AttnArgs::max_keys; FT_ATTN_KEY_BOUND=0 turns it off). tg128 with -p 0, -p 512 and
# -p 0 --ctx-size 4096 (a server's context), bound on / off alternating, 2 rounds; the same tokens on / off;
# FT_BENCH_PAUSE_MS=3000 once (a transient such as clocks would fade). Tests first.
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
gpu_tests 150 'CudaCheck.*:CudaGemvLean.*:CudaAttention.*:CudaAttentionPlan.*:*Session*'
models_wait
for f in $L $Q; do
  for round in 1 2; do
    for kb in 1 0; do
      for a in "-p 0" "-p 512" "-p 0 --ctx-size 4096"; do
        budget 400 "FT_ATTN_KEY_BOUND=$kb $a $(basename "$f")" || break 4
        log "FT_ATTN_KEY_BOUND=$kb $a round $round $(basename "$f")"
        FT_ATTN_KEY_BOUND=$kb timeout 60 "$B/ft" bench -m "$f" --device cuda $a -n 128 -r 2 --bw-gbs 4562 \
          2>>"$R/ft.err" | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a "$R/ft.md"
      done
    done
  done
  budget 400 "pause" && FT_BENCH_PAUSE_MS=3000 timeout 60 "$B/ft" bench -m "$f" --device cuda -p 512 -n 128 -r 2 \
    --bw-gbs 4562 2>>"$R/ft.err" | rows | sed 's/ | cuda (NVIDIA[^|]*//;s/$/ pause 3000/' | tee -a "$R/ft.md"
  budget 410 "tokens" && same_tokens FT_ATTN_KEY_BOUND "$f" 64
done
finish resa
