# Session 25's final-call A/B (sourced by bench/h200_final.sh with FINAL_AB=bench/session25/final_ab.sh): the
# tensor-core GEMV's launches without the SwiGLU tail on an instance without its code, against every tiled launch on
# the tail's instance (FT_MMA_GLU_SPLIT=0, the code before this session), tg128 alternating.
AB_BUDGET=330 ab_envs 2 $L FT_MMA_GLU_SPLIT=0 - -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=375 ab_envs 1 $Q FT_MMA_GLU_SPLIT=0 - -- -p 0 -n 128 -r 1 --bw-gbs 4562
