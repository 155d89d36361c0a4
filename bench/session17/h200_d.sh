#!/usr/bin/env bash
# Session 17, call 4: the tensor-core decode attention's grid (FT_ATTN_MMA_PLAN=PER_SM,UNIT: blocks per SM
# the split plan aims for, keys a chunk is a multiple of; default 4,64). Kernel times for each plan at
# 4096 / 16384 live keys on both models' shapes (ft-bench-attention-cuda --only, f16 cache), then tg128 at
# depth 4096 / 16384 with each model's best plan against the default, alternating.
#   PACK_ONLY="ft ft-bigmodel ft-bench-attention-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session17/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
for plan in 4,64 1,64 2,64 8,64 4,128 2,128 1,256 2,256 4,256; do
  for only in qwen3-30b-a3b:4096 qwen3-30b-a3b:16384 llama-8b:4096 llama-8b:16384; do
    budget 150 "bench $plan $only" || break
    FT_ATTN_MMA_PLAN=$plan timeout 20 "$B/ft-bench-attention-cuda" --kv f16 --pool-gib 0.5 --only $only 2>&1 |
      grep -E "^mma " | sed "s/^/$plan /" | tee -a $R/plans.txt
  done
done
best=$(python3 - "$R/plans.txt" <<'PY'
import sys, collections
t = collections.defaultdict(float); n = collections.defaultdict(int)
for line in open(sys.argv[1]):
    f = line.split()
    plan, model, us = f[0], f[2], float(f[f.index('us') - 1])
    t[(model, plan)] += us; n[(model, plan)] += 1
for model in ('qwen3-30b-a3b', 'llama-8b'):
    c = [(v, p) for (m, p), v in t.items() if m == model and n[(m, p)] == 2]
    print(min(c)[1] if c else '4,64', end=' ')
PY
)
log "best plans (qwen3, llama): $best"
set -- $best
models_wait
AB_BUDGET=300 ab_envs 2 $Q FT_ATTN_MMA_PLAN=4,64 FT_ATTN_MMA_PLAN=$1 -- -p 0 -n 128 -d 4096,16384 -r 1 --bw-gbs 4562
AB_BUDGET=370 ab_envs 2 $L FT_ATTN_MMA_PLAN=4,64 FT_ATTN_MMA_PLAN=$2 -- -p 0 -n 128 -d 4096,16384 -r 1 --bw-gbs 4562
finish resd
