# Session 24's final-call A/B (sourced by bench/h200_final.sh with FINAL_AB=bench/session24/final_ab.sh): the
# dense SwiGLU in the tiled gate|up GEMV's epilogue against its own launch (FT_GLU_FUSED=0), Llama-8B tg128.
AB_BUDGET=360 ab_envs 2 $L FT_GLU_FUSED=0 - -- -p 0 -n 128 -r 1 --bw-gbs 4562
