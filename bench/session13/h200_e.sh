#!/usr/bin/env bash
# Session 13, call 6: the q/k norm, rope and KV store inside the decode attention launch
# (AttnArgs::qkv_raw; FT_ATTN_ROPE=0 for the rope kernel before it): the whole test_cuda, Llama-8B /
# Qwen3-30B-A3B tg128 and tg128@d4096 alternating, and the same greedy tokens on and off.
#   run(command="timeout -s KILL 560 bash bench/session13/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
(cd $B && timeout 260 ./test_cuda --gtest_brief=1 > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=" $R/test.txt | head -12
model llama8b-nvfp4; model qwen3moe-30b-nvfp4
AB_BUDGET=400 ab_rounds FT_ATTN_ROPE "1 0" 2 $M/llama8b-nvfp4.gguf -p 0 -n 128 -d 0,4096 -r 2 --bw-gbs 4562
AB_BUDGET=480 ab_rounds FT_ATTN_ROPE "1 0" 2 $M/qwen3moe-30b-nvfp4.gguf -p 0 -n 128 -d 0,4096 -r 2 --bw-gbs 4562
for m in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  for v in 1 0; do
    FT_ATTN_ROPE=$v timeout 60 "$B/ft" generate --model $M/$m.gguf --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 \
      --max-tokens 48 --temperature 0 --ignore-eos --json > $R/gen_${m}_$v.json 2>>$R/ft.err
  done
  python3 -c "
import json; a=json.load(open('$R/gen_${m}_1.json'))['tokens']; b=json.load(open('$R/gen_${m}_0.json'))['tokens']
print('$m: rope inside attention vs apart:', 'same 48 tokens' if a==b else 'DIFFER', len(a), len(b))" 2>&1 | tee -a $R/log.txt
done
finish rese
