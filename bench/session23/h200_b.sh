#!/usr/bin/env bash
# Session 23, call 2: one token's RMSNorm inside the GEMV after it (GemvArgs::norm_x; gemv_mma.cuh
# mma_norm_build_x: every CTA of the qkv / gate|up GEMV normalises the row itself, rmsnorm_q8's bytes):
# the tests (CudaGemvNormIn.* memcmp against norm + gemv), GPU-vs-CPU and tiny models; tg128 alternating:
# Qwen3-30B-A3B default (the attention norm in the qkv GEMV) / FT_GEMV_NORM_IN=0 (the norm's own launch);
# Llama-8B default / FT_NORM_IN=3 (the FFN norm in gate|up too) / FT_GEMV_NORM_IN=0; greedy tokens on / off.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 480 bash bench/session23/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 200 'CudaGemvNormIn.*:CudaGemv*:CudaNvfp4Tiled.*:CudaOpsNorm*:Models/GpuVsCpu.*:Tiny/*:GpuSession*'
models_wait
AB_BUDGET=260 ab_envs 3 $Q - FT_GEMV_NORM_IN=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=370 ab_envs 3 $L - FT_NORM_IN=3 FT_GEMV_NORM_IN=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 390 tokens && same_tokens FT_GEMV_NORM_IN $Q 32
budget 410 tokens && FT_NORM_IN=3 same_tokens FT_GEMV_NORM_IN $L 32
finish resb
