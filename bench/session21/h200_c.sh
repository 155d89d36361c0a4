#!/usr/bin/env bash
# Session 21, call 3: the lean slab kernel on dense one-token launches (FT_GEMV_NVFP4_LEAN_DENSE: the wo
# projections of both models): bits against the slab kernel, tg128 on / off alternating on both models, the
# greedy tokens on / off, and what the links cost inside the chain now (FT_DEBUG_SKIP, garbage tokens).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 420 bash bench/session21/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 200 'CudaGemvLean.*:CudaGemvNvfp4.*:CudaGemv.*:CudaNvfp4Tiled.*:GpuNvfp4Tiled.*:Models/GpuVsCpu.*:Tiny/*'
models_wait
AB_BUDGET=200 ab_envs 3 $L - FT_GEMV_NVFP4_LEAN_DENSE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=250 ab_envs 3 $Q - FT_GEMV_NVFP4_LEAN_DENSE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 270 tokens && same_tokens FT_GEMV_NVFP4_LEAN_DENSE $L 48
budget 280 tokens && same_tokens FT_GEMV_NVFP4_LEAN_DENSE $Q 48
AB_BUDGET=330 ab_envs 1 $Q FT_DEBUG_SKIP=qkv FT_DEBUG_SKIP=wo FT_DEBUG_SKIP=router FT_DEBUG_SKIP=experts - \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=360 ab_envs 1 $L FT_DEBUG_SKIP=wo FT_DEBUG_SKIP=swiglu FT_DEBUG_SKIP=norm2 - -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resc
