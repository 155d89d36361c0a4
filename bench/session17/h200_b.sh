#!/usr/bin/env bash
# Session 17, call 2 (branch wip/attn-mma-fused + the fused gate|up + SwiGLU): the tests of both, then
# Llama-8B tg128 with FT_GEMV_GLU on (1) / off (0) alternating and at other warps, the one-launch mma
# attention at depth (FT_ATTN_MMA_MIN_KEYS 1024 / 0) and from the first key (1) at depth 0, greedy tokens.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 540 bash bench/session17/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
gpu_tests 200 'CudaGemvGlu.*:GpuGlu.*:CudaAttention.*:GpuAttentionMma.*:Models/GpuVsCpu.*'
models_wait
AB_BUDGET=330 ab_envs 3 $L FT_GEMV_GLU=1 FT_GEMV_GLU=0 -- -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=360 ab_envs 1 $L FT_GEMV_GLU=4,3 FT_GEMV_GLU=8,2 FT_GEMV_GLU=8,3 -- -p 0 -n 128 -r 2 --bw-gbs 4562
for f in $Q $L; do
  AB_BUDGET=450 ab_envs 1 $f FT_ATTN_MMA_MIN_KEYS=1024 FT_ATTN_MMA_MIN_KEYS=0 -- -p 0 -n 128 -d 4096,16384 -r 1 --bw-gbs 4562
done
for f in $Q $L; do
  AB_BUDGET=480 ab_envs 1 $f FT_ATTN_MMA_MIN_KEYS=1 FT_ATTN_MMA_MIN_KEYS=1024 -- -p 0 -n 128 -r 2 --bw-gbs 4562
done
budget 500 "same tokens" && same_tokens FT_GEMV_GLU $L
budget 515 "same tokens" && same_tokens FT_ATTN_MMA_MIN_KEYS $Q
finish resb
