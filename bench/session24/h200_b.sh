#!/usr/bin/env bash
# Session 24, call 2: the grouped tensor-core expert gate / up (FT_GEMV_NVFP4_MMA_EXPERTS=W,S, off by
# default here) with and without the SwiGLU in its epilogue, the SwiGLU tails' fences (FT_GLU_TAIL=1:
# acquire-release), the down launch routing for itself or not (FT_MOE_ROUTE_COMBINE): tests, tokens
# against the default, tg128 A/B alternating in this call.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 570 bash bench/session24/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
log "kernel tests"
gpu_tests 90 'CudaGemvMmaGrouped.*:CudaGemvLean.*:CudaNvfp4Tiled.*'
cp "$R/test.txt" "$R/test_kernels.txt"
log "session tests with the grouped kernel"
FT_GEMV_NVFP4_MMA_EXPERTS=4,3 gpu_tests 120 '*Session*:*Offload*'
models_wait
tokens_under "FT_GEMV_NVFP4_MMA_EXPERTS=4,3" $Q
tokens_under "FT_GLU_TAIL=1" $Q
tokens_under "FT_GLU_TAIL=1" $L
AB_BUDGET=420 ab_envs 2 $Q FT_MOE_GLU_FUSED=0 "FT_GEMV_NVFP4_MMA_EXPERTS=4,3 FT_MOE_GLU_FUSED=0" \
  "FT_GEMV_NVFP4_MMA_EXPERTS=8,2 FT_MOE_GLU_FUSED=0" FT_GEMV_NVFP4_MMA_EXPERTS=4,3 \
  "FT_GEMV_NVFP4_MMA_EXPERTS=4,3 FT_GLU_TAIL=1" FT_GLU_TAIL=1 "FT_GLU_TAIL=1 FT_MOE_ROUTE_COMBINE=0" \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=500 ab_envs 2 $L FT_GLU_FUSED=0 - FT_GLU_TAIL=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resb
