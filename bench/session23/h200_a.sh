#!/usr/bin/env bash
# Session 23, call 1: session 22's review commit on the device (write_renormalised, compiled, not run), and
# address translation as the suspect for the changing experts' ~2.2 us a layer (session 22: the same routing
# on last step's experts ran ~5% faster): Qwen3-30B-A3B tg128 default / FT_DEBUG_SKIP=route_ids (last step's
# experts) / route_few (experts change within 16 a layer) / FT_MOE_TLB_WARM=1,2 (every expert's gate and up
# rows touched before the PDL wait: prefetch / load); Llama-8B tg128 default / FT_GEMV_TLB_WARM=21,16 (dense
# weights touched every 2 MB / 64 KB before the wait).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 480 bash bench/session23/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 150 'CudaOpsMoeRoute.*:CudaGemvLean.*:CudaGemv*:Models/GpuVsCpu.*'
models_wait
AB_BUDGET=330 ab_envs 2 $Q - FT_DEBUG_SKIP=route_ids FT_DEBUG_SKIP=route_few FT_MOE_TLB_WARM=1 FT_MOE_TLB_WARM=2 \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=420 ab_envs 2 $L - FT_GEMV_TLB_WARM=21 FT_GEMV_TLB_WARM=16 -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 450 tokens && same_tokens FT_MOE_TLB_WARM $Q 32
finish resa
