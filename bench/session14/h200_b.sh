#!/usr/bin/env bash
# Session 14, call 2: the MoE kernel with its scales loaded while the weights stream in, and the
# gate/up pair with the SwiGLU in its epilogue (gemv_pair_swiglu; FT_MOE_GLU=0 off): the MoE tests
# and the whole test_cuda, Qwen3-30B-A3B tg128 / @d4096 alternating over default / FT_MOE_GLU=0 /
# FT_GEMV_NVFP4_MOE=0 (slab + packed kernels, swiglu_q8) / FT_GEMV_NVFP4_MOE=1,8, the same greedy
# tokens as with the old kernels, and every kernel's duration in a decode step (ncu, serialised).
#   run(command="timeout -s KILL 590 bash bench/session14/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
model qwen3moe-30b-nvfp4 &
(cd $B && timeout 90 ./test_cuda --gtest_filter='CudaGemvMoe*:CudaGemvNvfp4*:*MoeCpu*:*Moe*Parity*' > $R/test_moe.txt 2>&1; echo "rc=$?" >> $R/test_moe.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|launches" $R/test_moe.txt | head -20
(cd $B && timeout 260 ./test_cuda --gtest_brief=1 > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=" $R/test.txt | head -12
wait
model qwen3moe-30b-nvfp4
AB_BUDGET=430 ab_envs 2 $M/qwen3moe-30b-nvfp4.gguf - FT_MOE_GLU=0 FT_GEMV_NVFP4_MOE=0 FT_GEMV_NVFP4_MOE=1,8 -- \
  -p 0 -n 128 -d 0,4096 -r 2 --bw-gbs 4562
same_tokens FT_GEMV_NVFP4_MOE $M/qwen3moe-30b-nvfp4.gguf
if budget 500 "ncu"; then
  timeout 80 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    $B/ft generate --model $M/qwen3moe-30b-nvfp4.gguf --device cuda --prompt-tokens 1,2,3,4 --max-tokens 3 \
    --temperature 0 --ignore-eos > $R/ncu_qwen3.csv 2>$R/ncu_qwen3.err
  python3 bench/ncu_step.py $R/ncu_qwen3.csv --layers 48 2>&1 | tee $R/ncu_qwen3.md | head -30
fi
finish resb
