#!/usr/bin/env bash
# Session 20, call 3: one query row a block of the dedicated decode attention for one token (the new
# default, kDecodeMaxRowsOneToken): the attention and GPU-vs-CPU tests; tg128 at depth 0 against
# FT_ATTN_DECODE_ROWS=2; and at 4096 / 16384 keys the tensor-core decode attention (default past 256 keys)
# against the dedicated kernel with its staged keys (FT_ATTN_MMA_MIN_KEYS=0), both models, alternating.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session20/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 120 'CudaAttention*:Models/GpuVsCpu.*:GpuSession*'
models_wait
AB_BUDGET=150 ab_envs 1 $L - FT_ATTN_DECODE_ROWS=2 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=170 ab_envs 1 $Q - FT_ATTN_DECODE_ROWS=2 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=290 ab_envs 2 $L - FT_ATTN_MMA_MIN_KEYS=0 -- -p 0 -n 128 -d 4096,16384 -r 1 --bw-gbs 4562
AB_BUDGET=380 ab_envs 2 $Q - FT_ATTN_MMA_MIN_KEYS=0 -- -p 0 -n 128 -d 4096,16384 -r 1 --bw-gbs 4562
finish resc
