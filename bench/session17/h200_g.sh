#!/usr/bin/env bash
# Session 17, call 7 (after the review): graphs keyed by the deep-attention flag only where the
# tensor-core kernel applies (GpuForward::decode_mma_applies). The attention, session and GPU-vs-CPU
# tests, and tg128 at depth 0 / 4096 on both models (the kernel must still engage at depth).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session17/h200_g.sh; tar czf $OUT/resg.tgz -C /tmp resg",
#       carry=[".devcarry/pack"])
# (Its ft bench loop is device_common.sh's ft_bench_each since session 18's review; the script held the
# loop itself when it ran.)
R=/tmp/resg
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
gpu_tests 200 'CudaAttention.*:GpuAttentionMma.*:Models/GpuVsCpu.*:GpuSampling.*:Qwen35*:Gemma4*'
models_wait
ft_bench_each 280 60 "-p 0 -n 128 -d 0,4096 -r 2 --bw-gbs 4562" $L $Q
finish resg
