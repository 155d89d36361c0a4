#!/usr/bin/env bash
# Session 13, call 3: the warp-fed bulk-copy mma GEMV (gemv_mma_tma.cu, FT_GEMV_NVFP4_TMA=MODE[,W,J,S]):
# its tests, the kernel benchmark per variant, and Llama-8B / Qwen3-30B-A3B tg128 alternating.
#   run(command="timeout -s KILL 560 bash bench/session13/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
(cd $B && timeout 150 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemvTma*:CudaGemvBulk*:CudaGemvPersist*:CudaGemvNvfp4*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=" $R/test.txt | head -8
model llama8b-nvfp4; model qwen3moe-30b-nvfp4
i=0
for v in 0 2 2,4,4,1 2,4,2,2 2,4,4,2 2,8,4,1 2,8,2,1 2,4,8,1 2,4,8,2 2,8,8,1; do
  budget 200 "gemv bench $v" || break
  log "gemv bench FT_GEMV_NVFP4_TMA=$v"
  FT_GEMV_NVFP4_TMA=$v timeout 60 $B/ft-bench-gemv-cuda --experts --launches 40 --pool-gib 0.5 > $R/gemv$i.txt 2>&1
  echo "$v" > $R/gemv$i.var; i=$((i + 1))
done
AB_BUDGET=420 ab_rounds FT_GEMV_NVFP4_TMA "1 0 2" 2 $M/llama8b-nvfp4.gguf -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=500 ab_rounds FT_GEMV_NVFP4_TMA "1 0" 2 $M/qwen3moe-30b-nvfp4.gguf -p 0 -n 128 -r 2 --bw-gbs 4562
finish resc
