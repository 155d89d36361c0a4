#!/usr/bin/env bash
# Session 13, call 2: the decode norm in the last CTA of the GEMV before it (cuda::gemv_norm;
# FT_GEMV_NORM=0 for separate norm launches): the whole test_cuda, Llama-8B / Qwen3-30B-A3B tg128
# alternating on / off, and the same greedy tokens on and off.
#   run(command="timeout -s KILL 560 bash bench/session13/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
(cd $B && timeout 240 ./test_cuda --gtest_brief=1 > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=" $R/test.txt | head -12
model llama8b-nvfp4; model qwen3moe-30b-nvfp4
AB_BUDGET=420 ab_rounds FT_GEMV_NORM "1 0" 2 $M/llama8b-nvfp4.gguf -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=500 ab_rounds FT_GEMV_NORM "1 0" 2 $M/qwen3moe-30b-nvfp4.gguf -p 0 -n 128 -r 2 --bw-gbs 4562
for m in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  for v in 1 0; do
    FT_GEMV_NORM=$v timeout 60 "$B/ft" generate --model $M/$m.gguf --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 \
      --max-tokens 48 --temperature 0 --ignore-eos --json > $R/gen_${m}_$v.json 2>>$R/ft.err
  done
  python3 -c "
import json; a=json.load(open('$R/gen_${m}_1.json'))['tokens']; b=json.load(open('$R/gen_${m}_0.json'))['tokens']
print('$m: norm in the GEMV vs apart: same 48 tokens' if a==b else '$m: DIFFER', len(a), len(b))" 2>&1 | tee -a $R/log.txt
done
finish resb
