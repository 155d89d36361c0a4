#!/usr/bin/env bash
# Session 19, call 8: the dedicated decode attention's least chunk of 128 keys (kDecodeMinChunk) as the
# default: attention / session / tiled tests, then tg128 with it and with FT_ATTN_MIN_CHUNK=0, both models.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session19/h200_h.sh; tar czf $OUT/resh.tgz -C /tmp resh",
#       carry=[".devcarry/pack"])
R=/tmp/resh
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
gpu_tests 150 'CudaAttention*:Models/GpuVsCpu.*:GpuNvfp4Tiled.*:CudaNvfp4Tiled.*:GpuAttentionMma.*'
models_wait
AB_BUDGET=220 ab_envs 2 $L - FT_ATTN_MIN_CHUNK=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=270 ab_envs 2 $Q - FT_ATTN_MIN_CHUNK=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resh
