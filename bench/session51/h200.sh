#!/usr/bin/env bash
# Session 51, for an H200 (~460 s, sized to what was left of the session's device time): llama.cpp v0.5.0's CUDA
# llama-bench built in the background; lanes tests; ft-bench-gemv-cuda --direct from HBM (the 80% criterion,
# tiled and lanes); Llama-8B and Qwen3-30B-A3B tg128 with the defaults / FT_NVFP4_LANES=1
# alternating (eagerly loaded); issue 3's depth table for ft (defaults) -- beside the build, which costs ft ~1.5%
# (session 28) -- then test_cuda (all) until llama.cpp is built, then llama-bench's depth table.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session51/h200.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res51h
source bench/device_common.sh
source bench/session51/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
llama_build_bg
kernels_and_ab 130 175
ft_bench_each 285 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
snap
log "test_cuda (all, until llama.cpp is built)"
gpu_tests_until 370
snap
llama_depth_rows 380 450 $L $Q
finish res51h
