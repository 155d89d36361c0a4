# Session 25's second final call (FINAL_AB=bench/session25/final_ab2.sh, main's binaries): whether the tensor-core
# GEMV launches gain from sharing one kernel instance (call 2: giving the tail-less launches their own instance lost
# 3.5%) -- every mma launch at 4 warps x 2 stages (Llama-8B's down joins its qkv and gate|up) or at 8 x 3, against the
# plan (qkv, gate|up 4 x 2; down 8 x 3), tg128 alternating.
AB_BUDGET=360 ab_envs 2 $L - FT_GEMV_NVFP4_MMA=4,2 FT_GEMV_NVFP4_MMA=8,3 -- -p 0 -n 128 -r 1 --bw-gbs 4562
