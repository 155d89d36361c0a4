# Session 22's final-call A/B (sourced by bench/h200_final.sh with FINAL_AB=bench/session22/final_ab.sh):
# the fast route (default) / the exact rounds / no routing / routing whose ids are not used (the experts stay
# the last step's: the routing's own cost apart from the experts changing).
AB_BUDGET=350 ab_envs 2 $Q - FT_MOE_ROUTE_FAST=0 FT_DEBUG_SKIP=route FT_DEBUG_SKIP=route_ids -- -p 0 -n 128 -r 1 --bw-gbs 4562
