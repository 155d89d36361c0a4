#!/usr/bin/env bash
# Session 14, call 6: the residual read before the PDL wait by the accumulating GEMVs (GemvArgs::y_early:
# wo, down, the MoE combine; FT_GEMV_Y_EARLY=0 off): the GEMV / MoE / parity tests, Llama-8B and
# Qwen3-30B-A3B tg128 alternating on / off, the same greedy tokens on and off.
#   run(command="timeout -s KILL 420 bash bench/session14/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
(model llama8b-nvfp4; model qwen3moe-30b-nvfp4) > $R/models.txt 2>&1 &
MP=$!
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 --gtest_filter='*Moe*:CudaGemv*:*Parity*:*Forward*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=" $R/test.txt | head -20
wait $MP; cat $R/models.txt
for m in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  AB_BUDGET=330 ab_rounds FT_GEMV_Y_EARLY "1 0" 3 $M/$m.gguf -p 0 -n 128 -r 2 --bw-gbs 4562
  same_tokens FT_GEMV_Y_EARLY $M/$m.gguf
done
finish resd
