#!/usr/bin/env bash
# Session 22, call 1: session 21's review commits on the device (they were compiled, not run), and what
# the fused MoE experts' sub-links cost inside the chain (FT_DEBUG_SKIP route / moe_swiglu, new; garbage
# tokens): the routing in the gate|up launch and the SwiGLU launch between gate|up and down.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 420 bash bench/session22/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 200 'CudaGemvLean.*:CudaGemv*:CudaOpsMoeRoute.*:Models/GpuVsCpu.*:Tiny/*'
models_wait
AB_BUDGET=300 ab_envs 2 $Q - FT_DEBUG_SKIP=route FT_DEBUG_SKIP=moe_swiglu FT_DEBUG_SKIP=router \
  FT_DEBUG_SKIP=route,moe_swiglu -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=340 ab_envs 1 $L - -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resa
