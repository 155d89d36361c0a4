#!/usr/bin/env bash
# Session 34, call 5: main's head after the final call (the ring only where two blocks fit an SM; comments,
# the carveout knob dropped): the attention / session / rope tests and one tg128 round at depth 4096 / 16384.
R=/tmp/resd
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "attention / session tests"
gpu_tests 150 'CudaAttention.*:GpuAttentionMma.*:*Rope*'
models_wait
ft_bench_each 250 100 "-p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562" $L $Q
finish resd
