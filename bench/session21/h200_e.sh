#!/usr/bin/env bash
# Session 21, call 5: the lean expert gate|up launch's rows an item and blocks an SM in the chain
# (FT_GEMV_NVFP4_EXPERT_PLAN=R,B; the plan's is 2,6), the norm + router as two launches (FT_MOE_NORM_ROUTE=0),
# the routing test's corrected count, and the lean kernels' instruction counts (ncu, serialised).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session21/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
gpu_tests 100 'CudaGemvLean.*'
models_wait
AB_BUDGET=170 ab_envs 2 $Q - FT_GEMV_NVFP4_EXPERT_PLAN=1,6 FT_GEMV_NVFP4_EXPERT_PLAN=1,4 FT_GEMV_NVFP4_EXPERT_PLAN=2,4 \
  FT_GEMV_NVFP4_EXPERT_PLAN=4,4 FT_MOE_NORM_ROUTE=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
if budget 200 ncu; then
  timeout 60 ncu --clock-control none -k regex:lean_slab|experts_packed|norm_router|swiglu --launch-skip 800 --launch-count 8 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --csv $B/ft generate --model $Q --device cuda --prompt-tokens 1,2,3,4 --max-tokens 6 --temperature 0 --ignore-eos \
    > $R/ncu.csv 2>$R/ncu.err
  grep -E "lean_slab|experts_packed|norm_router|swiglu" $R/ncu.csv | awk -F'","' '{print $5" | "$(NF-2)" | "$NF}' | cut -c1-160 | head -24
fi
finish rese
