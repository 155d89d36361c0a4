#!/usr/bin/env bash
# Session 18, call 5: the tensor-core GEMVs' row scales read before the PDL wait (FT_GEMV_RS_EARLY,
# default on; call 4 found the decode GEMVs no faster with their weights in L2, so what remains
# is latency inside the launch). Tests, then tg128 A/B on both models, alternating; Qwen3-30B-A3B
# also with the L2 prefetch (FT_L2_PREFETCH=1).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session18/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
gpu_tests 150 'CudaGemv*:GpuL2Prefetch.*:Models/GpuVsCpu.*'
models_wait
export AB_BUDGET=250
ab_envs 4 $L - FT_GEMV_RS_EARLY=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
export AB_BUDGET=450
ab_envs 3 $Q - FT_GEMV_RS_EARLY=0 FT_L2_PREFETCH=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 480 "tokens" && same_tokens FT_GEMV_RS_EARLY $L 32
finish rese
