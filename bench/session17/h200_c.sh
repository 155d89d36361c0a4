#!/usr/bin/env bash
# Session 17, call 3: the NVFP4 mma GEMV split over k (FT_GEMV_SPLIT=S,W,NS,MAX_ROWS; the shapes the
# plan gives the slab kernel: Llama-8B wo 4096x4096 and down 4096x14336, Qwen3-30B-A3B wo 2048x4096):
# its tests and the GEMV / session tests, then tg128 with splits 2 / 3 / 4 against off, alternating.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 420 bash bench/session17/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
gpu_tests 150 'CudaGemvSplit.*:CudaGemvPersist.*:CudaGemvNvfp4*:Models/GpuVsCpu.*'
models_wait
AB_BUDGET=250 ab_envs 2 $L FT_GEMV_SPLIT=0 FT_GEMV_SPLIT=2,4,2,4096 FT_GEMV_SPLIT=4,4,2,4096 FT_GEMV_SPLIT=3,4,2,4096 FT_GEMV_SPLIT=4,8,2,4096 FT_GEMV_SPLIT=2,4,2,8192 -- -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=370 ab_envs 2 $Q FT_GEMV_SPLIT=0 FT_GEMV_SPLIT=2,4,2,4096 FT_GEMV_SPLIT=4,4,2,4096 FT_GEMV_SPLIT=3,4,2,4096 FT_GEMV_SPLIT=4,8,2,4096 -- -p 0 -n 128 -r 2 --bw-gbs 4562
finish resc
