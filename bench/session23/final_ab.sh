# Session 23's final-call A/B (sourced by bench/h200_final.sh with FINAL_AB=bench/session23/final_ab.sh):
# the experts-changing read probe (tools/bench_tlb_cuda.cu, call 3's), and the MoE routing links again now
# that the ids buffer starts on distinct experts (slot j = expert j): real routing / no routing (route) /
# routing whose ids are not used (route_ids: the same bytes read) / experts within 16 a layer (route_few).
(cd $B && timeout 60 ./ft-bench-tlb-cuda > $R/tlb.txt 2>&1; echo "rc=$?" >> $R/tlb.txt)
cat $R/tlb.txt
AB_BUDGET=345 ab_envs 2 $Q - FT_DEBUG_SKIP=route FT_DEBUG_SKIP=route_ids FT_DEBUG_SKIP=route_few -- -p 0 -n 128 -r 1 --bw-gbs 4562
