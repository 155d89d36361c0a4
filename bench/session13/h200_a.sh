#!/usr/bin/env bash
# Session 13, call 1: the L2 prefetch of the NVFP4 GEMV weights (FT_GEMV_L2PF 0 / 1 / 2): the GEMV
# tests with it on, the kernel benchmark per mode, and Llama-8B / Qwen3-30B-A3B tg128 alternating.
#   run(command="timeout -s KILL 560 bash bench/session13/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
(cd $B && FT_GEMV_L2PF=2 timeout 150 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemv*:*GpuVsCpu*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=" $R/test.txt | head -8
model llama8b-nvfp4; model qwen3moe-30b-nvfp4
for v in 0 1 2; do
  budget 250 "gemv bench $v" || break
  log "gemv bench FT_GEMV_L2PF=$v"
  FT_GEMV_L2PF=$v timeout 60 $B/ft-bench-gemv-cuda --experts --launches 40 --pool-gib 0.5 > $R/gemv$v.txt 2>&1
done
AB_BUDGET=480 ab_rounds FT_GEMV_L2PF "1 0 2" 2 $M/llama8b-nvfp4.gguf -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=540 ab_rounds FT_GEMV_L2PF "1 0 2" 1 $M/qwen3moe-30b-nvfp4.gguf -p 0 -n 128 -r 2 --bw-gbs 4562
finish resa
