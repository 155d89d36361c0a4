#!/usr/bin/env bash
# Session 27, call 3 (binaries of wip/s27: call 2's SS and YE now the defaults, + FT_ATTN_PRE_L1 -- the decode
# attention's q / k norm weights and rope row prefetched into L1 before its PDL wait): tests under it, tokens, tg128
# alternating on both models.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 330 bash bench/session27/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
log "test_cuda (attention, lean, tiled, GEMV, GPU vs CPU) under FT_ATTN_PRE_L1=1"
FT_ATTN_PRE_L1=1 gpu_tests 150 'CudaAttention*:CudaGemv*:CudaNvfp4Tiled.*:*GpuVsCpu*'
models_wait
tokens_under FT_ATTN_PRE_L1=1 $Q
tokens_under FT_ATTN_PRE_L1=1 $L
AB_BUDGET=260 ab_envs 4 $Q - FT_ATTN_PRE_L1=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=310 ab_envs 4 $L - FT_ATTN_PRE_L1=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resc
