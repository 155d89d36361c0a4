#!/usr/bin/env bash
# Session 12, call 7: the decode RMSNorm inside the next GEMV's launch (GemvArgs::norm_x, the mma
# kernel's prologue; FT_NORM_GEMV=0 none, =attn the attention norm only): its bit-for-bit test
# and the GPU tests, Llama-8B and Qwen3-30B-A3B end to end A/B, greedy tokens.
#   run(command="timeout -s KILL 450 bash bench/session12/h200_g.sh; tar czf $OUT/resg.tgz -C /tmp resg",
#       carry=[".devcarry/pack"])
R=/tmp/resg
source bench/device_common.sh
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemv*:CudaOpsNorm*:CudaOpsMoeRoute*:*GpuVsCpu*:*GpuBatch*:*GpuSession*:*Moe*:*Offload*:*Hybrid*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|exception" $R/test.txt | head -16
model llama8b-nvfp4; model qwen3moe-30b-nvfp4
for m in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  for round in 1 2; do
    for v in 1 0 attn; do
      [ $m = qwen3moe-30b-nvfp4 ] && [ $v = attn ] && continue
      budget 380 "$m $v" || break
      log "$m FT_NORM_GEMV=$v round $round"
      FT_NORM_GEMV=$v timeout 60 "$B/ft" bench -m $M/$m.gguf --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
    done
  done
  for v in 1 0; do
    FT_NORM_GEMV=$v timeout 60 "$B/ft" generate --model $M/$m.gguf --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 48 --temperature 0 --ignore-eos --json > $R/gen_${m}_$v.json 2>>$R/ft.err
  done
  python3 -c "
import json; a=json.load(open('$R/gen_${m}_1.json'))['tokens']; b=json.load(open('$R/gen_${m}_0.json'))['tokens']
print('$m norm in GEMV vs apart: same 48 tokens' if a==b else '$m DIFFER', len(a), len(b))" 2>&1 | tee -a $R/log.txt
done
finish resg
