#!/usr/bin/env bash
# Session 13, call 4: the plan routes kernel-3 shapes with k <= 2048 to gemv_mma_tma.cu
# (GemvNvfp4Plan::tma): the whole test_cuda, the kernel benchmark, Qwen3-30B-A3B tg128 with the
# plan / FT_GEMV_NVFP4_TMA=0 (never) / 2 (also the slab shapes: wo 2048x4096) alternating, Llama-8B
# (no k <= 2048 shape) once, and the same greedy tokens with and without.
#   run(command="timeout -s KILL 560 bash bench/session13/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
(cd $B && timeout 260 ./test_cuda --gtest_brief=1 > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=" $R/test.txt | head -12
model llama8b-nvfp4; model qwen3moe-30b-nvfp4
timeout 60 $B/ft-bench-gemv-cuda --experts --launches 40 --pool-gib 0.5 > $R/gemv.txt 2>&1
AB_BUDGET=430 ab_rounds FT_GEMV_NVFP4_TMA "0 2" 1 $M/qwen3moe-30b-nvfp4.gguf -p 0 -n 128 -r 2 --bw-gbs 4562
for round in 1 2; do
  budget 440 "plan round $round" || break
  log "plan round $round"
  timeout 90 "$B/ft" bench -m $M/qwen3moe-30b-nvfp4.gguf --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | tee -a $R/ft.md
  FT_GEMV_NVFP4_TMA=0 timeout 90 "$B/ft" bench -m $M/qwen3moe-30b-nvfp4.gguf --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | tee -a $R/ft.md
done
timeout 90 "$B/ft" bench -m $M/llama8b-nvfp4.gguf --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | tee -a $R/ft.md
for v in plan 0; do
  env FT_GEMV_NVFP4_TMA=$([ $v = plan ] || echo 0) timeout 60 "$B/ft" generate --model $M/qwen3moe-30b-nvfp4.gguf --device cuda \
    --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 48 --temperature 0 --ignore-eos --json > $R/gen_$v.json 2>>$R/ft.err
done
python3 -c "
import json; a=json.load(open('$R/gen_plan.json'))['tokens']; b=json.load(open('$R/gen_0.json'))['tokens']
print('qwen3moe: tma plan vs none:', 'same 48 tokens' if a==b else 'DIFFER at %d' % next(i for i in range(min(len(a),len(b))) if a[i]!=b[i]), len(a), len(b))" 2>&1 | tee -a $R/log.txt
finish resd
