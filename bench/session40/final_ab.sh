# Session 40's A/B inside the final call (FINAL_AB=bench/session40/final_ab.sh bench/h200_final.sh): both norm folds
# (FT_NORM_FOLD=3) against the default attention-norm fold, now that the producer tails load their norm weights
# before the PDL wait (call 1: 3 at or above 2 in all six rounds, +0.1-0.3%). Llama-8B tg128 alternating.
tokens_under "FT_NORM_FOLD=3" "$L"
AB_BUDGET=462 ab_envs 5 "$L" - "FT_NORM_FOLD=3" -- -p 0 -n 128 -r 2 --bw-gbs 4562
