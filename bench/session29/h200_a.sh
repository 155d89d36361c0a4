#!/usr/bin/env bash
# Session 29 call 1: Llama-8B's tiled tensor-core GEMVs -- one m16n8k32 per tile half pair
# (FT_MMA_K32=1) against two m16n8k16, and the warps x stages sweep of bench/h200_plans.sh; tg128
# alternating, 3 rounds. Tests: the GEMV / tiled / GPU-vs-CPU tests under FT_MMA_K32=1.
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4
log "tests under FT_MMA_K32=1"
(cd "$B" && FT_MMA_K32=1 timeout 120 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemv*:*Tiled*:*GpuVsCpu*:*Nvfp4*' > "$R/test_k32.txt" 2>&1; echo "rc=$?" >> "$R/test_k32.txt")
grep -E "tests? ran|PASSED|FAILED|rc=|Failure" "$R/test_k32.txt" | tail -12 | tee -a "$R/log.txt"
models_wait
tokens_under FT_MMA_K32=1 $L
tokens_under FT_GEMV_NVFP4_TILED_PLAN="6144x4096=8,3;28672x4096=8,2;4096x14336=16,2" $L
AB_BUDGET=470 ab_envs 3 $L - FT_MMA_K32=1 \
  FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,3 FT_GEMV_NVFP4_TILED_PLAN=6144x4096=8,2 \
  FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,3 FT_GEMV_NVFP4_TILED_PLAN=28672x4096=8,2 \
  FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,2 FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,4 \
  FT_GEMV_NVFP4_TILED_PLAN=4096x14336=4,3 FT_GEMV_NVFP4_TILED_PLAN=4096x14336=16,2 \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resa
