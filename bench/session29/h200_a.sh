#!/usr/bin/env bash
# Session 29 call 1: the tiled GEMV's B words and scales from global memory (FT_MMA_XG=1, Llama-8B); the
# tensor-core GEMVs with one m16n8k32 per tile half pair (FT_MMA_K32=1: Llama-8B's tiled
# launches, Qwen3-30B-A3B's bulk-copy qkv) against two m16n8k16; Llama-8B's tiled warps x stages sweep (as
# bench/h200_plans.sh); the lean launches' bounds (FT_GEMV_NVFP4_COMBINE_MINB, FT_GEMV_NVFP4_DENSE_PLAN=R,0,B).
# tg128 alternating, 3 rounds. Tests: GEMV / tiled / GPU-vs-CPU under the switches; 64 tokens under each.
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests under FT_MMA_K32=1 FT_GEMV_NVFP4_COMBINE_MINB=8 FT_GEMV_NVFP4_DENSE_PLAN=1,0,8"
(cd "$B" && FT_MMA_K32=1 FT_GEMV_NVFP4_COMBINE_MINB=8 FT_GEMV_NVFP4_DENSE_PLAN=1,0,8 timeout 100 ./test_cuda \
   --gtest_brief=1 --gtest_filter='CudaGemv*:*Tiled*:*GpuVsCpu*:*Nvfp4*' > "$R/test_a.txt" 2>&1; echo "rc=$?" >> "$R/test_a.txt")
grep -E "tests? ran|PASSED|FAILED|rc=|Failure" "$R/test_a.txt" | tail -12 | tee -a "$R/log.txt"
log "tests under FT_MMA_XG=1"
(cd "$B" && FT_MMA_XG=1 timeout 80 ./test_cuda --gtest_brief=1 --gtest_filter='*Tiled*:*GpuVsCpu*' > "$R/test_xg.txt" 2>&1
 echo "rc=$?" >> "$R/test_xg.txt")
grep -E "tests? ran|PASSED|FAILED|rc=|Failure" "$R/test_xg.txt" | tail -12 | tee -a "$R/log.txt"
models_wait
tokens_under FT_MMA_K32=1 $L
tokens_under FT_MMA_XG=1 $L
tokens_under FT_GEMV_NVFP4_TILED_PLAN="6144x4096=8,3;28672x4096=8,2;4096x14336=16,2" $L
tokens_under "FT_MMA_K32=1 FT_GEMV_NVFP4_COMBINE_MINB=8 FT_GEMV_NVFP4_DENSE_PLAN=1,0,8" $Q
AB_BUDGET=370 ab_envs 3 $L - FT_MMA_K32=1 FT_MMA_XG=1 \
  FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,3 FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,3 \
  FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,2 FT_GEMV_NVFP4_TILED_PLAN=4096x14336=16,2 \
  FT_GEMV_NVFP4_DENSE_PLAN=2,0,6 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=530 ab_envs 3 $Q - FT_MMA_K32=1 FT_GEMV_NVFP4_COMBINE_MINB=6 FT_GEMV_NVFP4_COMBINE_MINB=8 \
  FT_GEMV_NVFP4_DENSE_PLAN=1,0,6 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resa
