#!/usr/bin/env bash
# Session 24, call 3: the MoE SwiGLU tail counted after each warp's last item (not after each item),
# dense SwiGLU tail kept: tests, tokens, tg128 A/B alternating in this call.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session24/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
gpu_tests 90 'CudaGemvLean.*:CudaNvfp4Tiled.*:*Session*'
models_wait
tokens_under "FT_MOE_GLU_FUSED=0" $Q
tokens_under "FT_GLU_FUSED=0" $L
AB_BUDGET=280 ab_envs 3 $Q FT_MOE_GLU_FUSED=0 - FT_MOE_ROUTE_COMBINE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=340 ab_envs 2 $L FT_GLU_FUSED=0 - -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resc
