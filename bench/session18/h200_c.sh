#!/usr/bin/env bash
# Session 18, call 3: the dense SwiGLU in the gate|up mma GEMV's tail (FT_GLU_TAIL, default on):
# its tests, the GPU-vs-CPU and prefetch tests, Llama-8B tg128 on / off alternating (and with the
# qkv / wo prefetch at a 16 MB cap), the same greedy tokens on and off.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session18/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
models_bg llama8b-nvfp4
log "tests"
gpu_tests 150 'CudaGemvGlu.*:CudaGemv*:GpuL2Prefetch.*:Models/GpuVsCpu.*'
models_wait
export AB_BUDGET=400
ab_envs 4 $L - FT_GLU_TAIL=0 "FT_L2_PREFETCH=1 FT_L2_PREFETCH_MB=16" -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 440 "tokens" && same_tokens FT_GLU_TAIL $L 48
budget 470 "depth" && timeout 60 "$B/ft" bench -m $L --device cuda -p 512 -n 128 -d 0,4096 -r 1 --bw-gbs 4562 \
  2>>"$R/ft.err" | rows | tee -a "$R/ft.md"
finish resc
