#!/usr/bin/env bash
# Session 20, call 5 (branch wip/attn-mma-prefetch, not kept): the tensor-core decode attention (one token past 256 keys) asking L2 for its chunk's
# K/V rows before the PDL wait (FT_ATTN_MMA_PREFETCH, off by default here): the attention tests with it at
# 1024 keys, then tg128 at 4096 / 16384 keys with 0 / 256 / 1024 keys prefetched, both models, alternating.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 200 bash bench/session20/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
FT_ATTN_MMA_PREFETCH=1024 gpu_tests 60 'CudaAttention.Mma*:CudaAttention.Dispatch*:GpuAttentionMma.*'
models_wait
AB_BUDGET=120 ab_envs 1 $L - FT_ATTN_MMA_PREFETCH=256 FT_ATTN_MMA_PREFETCH=1024 -- -p 0 -n 128 -d 4096,16384 -r 1 --bw-gbs 4562
AB_BUDGET=180 ab_envs 1 $Q - FT_ATTN_MMA_PREFETCH=256 FT_ATTN_MMA_PREFETCH=1024 -- -p 0 -n 128 -d 4096,16384 -r 1 --bw-gbs 4562
finish rese
