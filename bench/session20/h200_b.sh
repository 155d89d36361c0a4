#!/usr/bin/env bash
# Session 20, call 2: the tiled GEMM test's route check by the fused kernel's launch count (call 1 found the
# fused route's bits equal to cuBLAS's at its shape), the attention / tiled / GPU-vs-CPU tests with keys
# staged, and tg128 at 1 / 2 (default) / 4 query rows per block of the dedicated decode attention
# (FT_ATTN_DECODE_ROWS), both models, alternating.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 330 bash bench/session20/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 150 'CudaNvfp4Tiled.*:GpuNvfp4Tiled.*:CudaAttention*:Models/GpuVsCpu.*:CudaGemm*'
models_wait
AB_BUDGET=220 ab_envs 2 $L - FT_ATTN_DECODE_ROWS=1 FT_ATTN_DECODE_ROWS=4 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=300 ab_envs 2 $Q - FT_ATTN_DECODE_ROWS=1 FT_ATTN_DECODE_ROWS=4 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resb
