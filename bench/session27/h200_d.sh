#!/usr/bin/env bash
# Session 27, call 5 (binaries of main + FT_ATTN_PRE_L1=1|2: the decode attention's q / k norm weights and, at 1, the
# rope row prefetched into L1 before its PDL wait; the final call's A/B had 1 at +0.6% Qwen3-30B-A3B, -0.5% Llama-8B):
# attention tests under 2, tokens, tg128 alternating off / 1 / 2 on both models.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 250 bash bench/session27/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
log "test_cuda (attention, GPU vs CPU) under FT_ATTN_PRE_L1=2"
FT_ATTN_PRE_L1=2 gpu_tests 100 'CudaAttention*:*GpuVsCpu*'
models_wait
tokens_under FT_ATTN_PRE_L1=2 $Q
AB_BUDGET=200 ab_envs 4 $Q - FT_ATTN_PRE_L1=1 FT_ATTN_PRE_L1=2 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=235 ab_envs 3 $L - FT_ATTN_PRE_L1=2 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resd
