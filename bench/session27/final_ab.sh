# Session 27's final-call A/B (sourced by bench/h200_final.sh with FINAL_AB=bench/session27/final_ab.sh; the device
# refused call 3's own script, h200_c.sh): FT_ATTN_PRE_L1 -- the decode attention's q / k norm weights
# and rope row prefetched into L1 before its PDL wait -- tokens against the default, tg128 alternating on both models.
log "attention tests under FT_ATTN_PRE_L1=1"
(cd "$B" && FT_ATTN_PRE_L1=1 timeout 40 ./test_cuda --gtest_brief=1 --gtest_filter='CudaAttention*:*GpuVsCpu*' \
  > "$R/test_pre_l1.txt" 2>&1; echo "rc=$?" >> "$R/test_pre_l1.txt")
grep -E "tests? ran|PASSED|FAILED|rc=" "$R/test_pre_l1.txt" | tail -5
tokens_under FT_ATTN_PRE_L1=1 $Q
tokens_under FT_ATTN_PRE_L1=1 $L
AB_BUDGET=405 ab_envs 3 $Q - FT_ATTN_PRE_L1=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=420 ab_envs 3 $L - FT_ATTN_PRE_L1=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
