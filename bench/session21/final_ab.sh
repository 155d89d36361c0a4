# Session 21's final-call A/B (sourced by bench/h200_final.sh with FINAL_AB=bench/session21/final_ab.sh; call 5's
# A/B, h200_e.sh, whose own call found no machine): the lean expert gate|up launch's rows an item and blocks an SM
# (FT_GEMV_NVFP4_EXPERT_PLAN=R,B; the plan's 2,6) and the norm + router as two launches.
AB_BUDGET=345 ab_envs 1 $Q - FT_GEMV_NVFP4_EXPERT_PLAN=1,6 FT_GEMV_NVFP4_EXPERT_PLAN=2,4 FT_GEMV_NVFP4_EXPERT_PLAN=4,4 \
  FT_GEMV_NVFP4_EXPERT_PLAN=1,4 FT_MOE_NORM_ROUTE=0 - -- -p 0 -n 128 -r 1 --bw-gbs 4562
