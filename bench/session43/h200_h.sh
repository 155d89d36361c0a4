#!/usr/bin/env bash
# Session 43, call 8: test_cuda (all) on main's head (cd59234: the qkv launch at 3 stages, the bulk-copy GEMV on
# {x}-only fragments), then one tg128 of each model.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda (no llama-src)
#   run(command="timeout -s KILL 330 bash bench/session43/h200_h.sh; tar czf $OUT/resh.tgz -C /tmp resh",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resh
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda (all)"
gpu_tests 280
models_wait
ft_bench_each 320 60 "-p 0 -n 128 -r 2 --bw-gbs 4562" $L $Q
finish resh
