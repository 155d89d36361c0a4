#!/usr/bin/env bash
# Session 30 call 5: the rest of the final call's test suite (call 4's test_cuda ran out of its 300 s beside
# the llama.cpp build, in its last suite, Tiny/Qwen35MoeBackends, with no failure before it), then ft's
# tg128 on a quiet host (call 4's ran beside the build).
R=/tmp/resc
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda: Tiny/Qwen35MoeBackends.*"
gpu_tests 170 'Tiny/Qwen35MoeBackends.*'
models_wait
ft_bench_each 260 60 "-p 0 -n 128 -r 2 --bw-gbs 4562" $L $Q
finish resc
