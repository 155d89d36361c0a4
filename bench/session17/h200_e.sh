#!/usr/bin/env bash
# Session 17, call 5: the tensor-core decode attention with its new grid (2 blocks per SM, 128-key units):
# the decode kernel table (dedicated "decode" vs "mma" at 8 / 512 / 4096 / 16384 keys), tg128 at depth 512 /
# 1024 / 2048 with the threshold lowered to 256 keys (FT_ATTN_MMA_MIN_KEYS) against 1024, and Llama-8B's
# plan 2,128 (the default now) against 2,256 at depth 4096 / 16384, alternating.
#   PACK_ONLY="ft ft-bigmodel ft-bench-attention-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session17/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
timeout 60 "$B/ft-bench-attention-cuda" --kv f16 --decode-only --pool-gib 0.5 2>&1 | tee $R/attn.txt | grep -E "^(decode|mma) "
models_wait
for f in $Q $L; do
  AB_BUDGET=200 ab_envs 1 $f FT_ATTN_MMA_MIN_KEYS=1024 FT_ATTN_MMA_MIN_KEYS=256 -- -p 0 -n 128 -d 512,1024,2048 -r 1 --bw-gbs 4562
done
AB_BUDGET=260 ab_envs 2 $L FT_ATTN_MMA_PLAN=2,128 FT_ATTN_MMA_PLAN=2,256 -- -p 0 -n 128 -d 4096,16384 -r 1 --bw-gbs 4562
finish rese
