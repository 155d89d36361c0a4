#!/usr/bin/env bash
# Session 29 call 2: the lean launches' bounds -- Qwen3-30B-A3B's down + combine (FT_GEMV_NVFP4_COMBINE_MINB
# 6 / 8 against 4) and both models' wo (FT_GEMV_NVFP4_DENSE_PLAN=R,0,B: B 6 / 8 against 4); tg128
# alternating, 3 rounds; 64 tokens under each.
R=/tmp/resb
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
log "lean tests under FT_GEMV_NVFP4_COMBINE_MINB=8, FT_GEMV_NVFP4_DENSE_PLAN=1,0,8"
(cd "$B" && FT_GEMV_NVFP4_COMBINE_MINB=8 FT_GEMV_NVFP4_DENSE_PLAN=1,0,8 timeout 100 ./test_cuda --gtest_brief=1 \
   --gtest_filter='CudaGemv*:*GpuVsCpu*' > "$R/test_b.txt" 2>&1; echo "rc=$?" >> "$R/test_b.txt")
grep -E "tests? ran|PASSED|FAILED|rc=|Failure" "$R/test_b.txt" | tail -12 | tee -a "$R/log.txt"
models_wait
tokens_under "FT_GEMV_NVFP4_COMBINE_MINB=8 FT_GEMV_NVFP4_DENSE_PLAN=1,0,8" $Q
AB_BUDGET=330 ab_envs 3 $Q - FT_GEMV_NVFP4_COMBINE_MINB=6 FT_GEMV_NVFP4_COMBINE_MINB=8 \
  FT_GEMV_NVFP4_DENSE_PLAN=1,0,6 FT_GEMV_NVFP4_DENSE_PLAN=1,0,8 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=480 ab_envs 3 $L - FT_GEMV_NVFP4_DENSE_PLAN=2,0,6 FT_GEMV_NVFP4_DENSE_PLAN=2,0,8 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resb
