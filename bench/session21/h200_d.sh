#!/usr/bin/env bash
# Session 21, call 4: the lean slab kernel's 2-stage cp.async ring (a warp's first two steps in flight at once)
# and one token's routing inside the expert gate|up launch (FT_MOE_ROUTE_IN_EXPERTS; the router launch writes only
# its logits): tests, tg128 alternating on both models, the greedy tokens on / off, and the MoE link costs.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 420 bash bench/session21/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 200 'CudaGemvLean.*:CudaGemvNvfp4.*:CudaGemv.*:CudaOpsMoeRoute.*:CudaMoeFusedDecode.*:Models/GpuVsCpu.*:Models/GpuBatch.*:Tiny/*'
models_wait
AB_BUDGET=200 ab_envs 3 $Q - FT_MOE_ROUTE_IN_EXPERTS=0 "FT_MOE_ROUTE_IN_EXPERTS=0 FT_GEMV_NVFP4_EXPERTS=0" \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=240 ab_envs 2 $L - FT_GEMV_NVFP4_LEAN_DENSE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 255 tokens && same_tokens FT_MOE_ROUTE_IN_EXPERTS $Q 48
budget 265 tokens && same_tokens FT_GEMV_NVFP4_LEAN_DENSE $L 32
AB_BUDGET=300 ab_envs 1 $Q FT_DEBUG_SKIP=router FT_DEBUG_SKIP=experts FT_DEBUG_SKIP=wo - -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resd
