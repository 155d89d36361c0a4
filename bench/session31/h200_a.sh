#!/usr/bin/env bash
# Prepared in session 30 for the next session's first call: why ft's decode runs 2-3% slower after a prefill
# in the same process (session 30 calls 8-9, benches/h200.md). Llama-8B and Qwen3-30B-A3B tg128 with -p 0 and
# with -p 512, alternating, 2 rounds, under: nothing; FT_BENCH_PAUSE_MS=3000 (a transient such as clocks
# would fade); FT_CUDA_CACHE_CONFIG=l1 / equal / shared (the L1 / shared split the prefill's kernels leave);
# FT_CUDA_GRAPHS=0. nvidia-smi samples clocks, power and throttle reasons every 100 ms meanwhile.
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test: CudaCheck.CacheConfigEnv"
gpu_tests 60 'CudaCheck.*'
models_wait
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 100 > "$R/smi.csv" 2>&1 &
SMI=$!
for f in $L $Q; do
  for round in 1 2; do
    for e in - FT_BENCH_PAUSE_MS=3000 FT_CUDA_CACHE_CONFIG=l1 FT_CUDA_CACHE_CONFIG=equal FT_CUDA_CACHE_CONFIG=shared \
             FT_CUDA_GRAPHS=0; do
      for p in 0 512; do
        budget 420 "$e -p $p $(basename "$f")" || break 4
        log "$e -p $p round $round $(basename "$f")"
        env ${e/#-/} timeout 60 "$B/ft" bench -m "$f" --device cuda -p $p -n 128 -r 2 --bw-gbs 4562 2>>"$R/ft.err" | rows |
          sed 's/ | cuda (NVIDIA[^|]*//' | tee -a "$R/ft.md"
      done
    done
  done
done
kill $SMI
finish resa
