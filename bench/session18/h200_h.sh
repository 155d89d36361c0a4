#!/usr/bin/env bash
# Session 18, call 9 (after the review): the early row scale moved into gemv_mma.cuh's helpers (the same
# expressions). The GEMV and GPU-vs-CPU tests, tg128 once on each model.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 170 bash bench/session18/h200_h.sh; tar czf $OUT/resh.tgz -C /tmp resh",
#       carry=[".devcarry/pack"])
# (Its ft bench loop is device_common.sh's ft_bench_each since session 18's review; the script held the
# loop itself when it ran.)
R=/tmp/resh
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
gpu_tests 80 'CudaGemv*:Models/GpuVsCpu.*'
models_wait
ft_bench_each 150 40 "-p 0 -n 128 -r 1 --bw-gbs 4562" $L $Q
finish resh
