# Session 40's A/B inside the final call (FINAL_AB=bench/session40/final_ab.sh bench/h200_final.sh), Llama-8B tg128
# alternating: both norm folds (FT_NORM_FOLD=3) against the default attention-norm fold, now that the producer tails
# load their norm weights before the PDL wait (call 1, H200: 3 at or above 2 in all six rounds, +0.1-0.3%; call 2,
# H100: -1.1%); then the launch plans of bench/h200_plans.sh again, after the SwiGLU block order (session 39) and the
# early norm weights changed the tails of gate|up and down, plus wo's rows and blocks an SM.
tokens_under "FT_NORM_FOLD=3" "$L"
AB_BUDGET=300 ab_envs 4 "$L" - "FT_NORM_FOLD=3" -- -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=462 ab_envs 2 "$L" - \
  FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,3 FT_GEMV_NVFP4_TILED_PLAN=6144x4096=8,2 \
  FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,3 FT_GEMV_NVFP4_TILED_PLAN=28672x4096=8,2 \
  FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,3 FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,2 FT_GEMV_NVFP4_TILED_PLAN=4096x14336=16,2 \
  FT_GEMV_NVFP4_DENSE_PLAN=1,0 FT_GEMV_NVFP4_DENSE_PLAN=4,0 FT_GEMV_NVFP4_DENSE_PLAN=2,0,4 \
  -- -p 0 -n 128 -r 2 --bw-gbs 4562
