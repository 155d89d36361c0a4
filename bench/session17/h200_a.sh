#!/usr/bin/env bash
# Session 17, call 1 (branch wip/attn-mma-fused): the one-launch tensor-core decode attention (last-block
# merge, q/k norm + rope + KV store inside). Its tests and the attention / session / GPU-vs-CPU tests, then
# tg128 at depth 4096 / 16384 with it (FT_ATTN_MMA_MIN_KEYS=1024) and without (0), and at depth 0 with it from
# the first key (1) against the default, alternating, on both models; 48 greedy tokens 1 vs 0.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 500 bash bench/session17/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
gpu_tests 150 'CudaAttention.*:GpuAttentionMma.*:Models/GpuVsCpu.*'
models_wait
for f in $Q $L; do
  AB_BUDGET=400 ab_envs 2 $f FT_ATTN_MMA_MIN_KEYS=1024 FT_ATTN_MMA_MIN_KEYS=0 -- -p 0 -n 128 -d 4096,16384 -r 1 --bw-gbs 4562
done
for f in $Q $L; do
  AB_BUDGET=450 ab_envs 2 $f FT_ATTN_MMA_MIN_KEYS=1 FT_ATTN_MMA_MIN_KEYS=1024 -- -p 0 -n 128 -r 2 --bw-gbs 4562
done
budget 470 "same tokens" && same_tokens FT_ATTN_MMA_MIN_KEYS $Q
finish resa
