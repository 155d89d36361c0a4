#!/usr/bin/env bash
# Session 12, call 5: MoE gate and up in one launch (GemvArgs::w_pair on the NVFP4 slab kernel,
# FT_MOE_PAIR=0 for two): its bit-for-bit test, the MoE GPU tests, Qwen3-30B-A3B end to end A/B.
#   run(command="timeout -s KILL 500 bash bench/session12/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemv*:*GpuVsCpu*:*Moe*:*Offload*:*Hybrid*:*Qwen35*:*Gemma4Moe*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|exception" $R/test.txt | head -16
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
for round in 1 2; do
  for v in 1 0; do
    budget 440 "pair $v" || break
    log "FT_MOE_PAIR=$v round $round"
    FT_MOE_PAIR=$v timeout 60 "$B/ft" bench -m $Q --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
  done
done
FT_MOE_PAIR=1 timeout 60 "$B/ft" generate --model $Q --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 48 --temperature 0 --ignore-eos --json > $R/gen1.json 2>>$R/ft.err
FT_MOE_PAIR=0 timeout 60 "$B/ft" generate --model $Q --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 48 --temperature 0 --ignore-eos --json > $R/gen0.json 2>>$R/ft.err
python3 -c "
import json; a=json.load(open('$R/gen1.json'))['tokens']; b=json.load(open('$R/gen0.json'))['tokens']
print('pair vs two calls: same 48 tokens' if a==b else 'DIFFER', len(a), len(b))" 2>&1 | tee -a $R/log.txt
finish rese
