#!/usr/bin/env bash
# Session 12, call 6: the FFN norm inside the router's launch (cuda::moe_norm_router_route;
# FT_MOE_NORM_ROUTE=0 for two launches): its bit-for-bit test, the MoE / norm / GPU-vs-CPU
# tests, Qwen3-30B-A3B end to end A/B and greedy tokens.
#   run(command="timeout -s KILL 400 bash bench/session12/h200_f.sh; tar czf $OUT/resf.tgz -C /tmp resf",
#       carry=[".devcarry/pack"])
R=/tmp/resf
source bench/device_common.sh
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 --gtest_filter='CudaOpsMoeRoute*:CudaOpsNorm*:*GpuVsCpu*:*Moe*:*Offload*:*Hybrid*:*Gemma4Moe*:*Qwen35Moe*:CudaGemvNvfp4.Pair*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|exception" $R/test.txt | head -16
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
for round in 1 2; do
  for v in 1 0; do
    budget 300 "norm route $v" || break
    log "FT_MOE_NORM_ROUTE=$v round $round"
    FT_MOE_NORM_ROUTE=$v timeout 60 "$B/ft" bench -m $Q --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
  done
done
for v in 1 0; do
  FT_MOE_NORM_ROUTE=$v timeout 60 "$B/ft" generate --model $Q --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 48 --temperature 0 --ignore-eos --json > $R/gen$v.json 2>>$R/ft.err
done
python3 -c "
import json; a=json.load(open('$R/gen1.json'))['tokens']; b=json.load(open('$R/gen0.json'))['tokens']
print('fused vs two launches: same 48 tokens' if a==b else 'DIFFER', len(a), len(b))" 2>&1 | tee -a $R/log.txt
finish resf
