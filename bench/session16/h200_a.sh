#!/usr/bin/env bash
# Session 16, call 1: the first device run of session 15's one-launch MoE experts
# (FT_MOE_FUSED_DECODE=1, cuda/moe_decode_fused.cu) and the launch-chain probe: their tests,
# a Qwen3-30B-A3B tg128 A/B of FT_MOE_FUSED_DECODE 1 / 0 (alternating, 3 rounds), the same 48
# greedy tokens on and off, the chain table; llama.cpp's CUDA build compiles in the background for
# llama-bench on the same file at the end.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-chain-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session16/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
llama_build_bg
models_bg qwen3moe-30b-nvfp4
log "tests"
(cd $B && timeout 120 ./test_cuda --gtest_brief=1 --gtest_filter='CudaMoeFusedDecode*:CudaGemvNvfp4.Pair*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differ|exception" $R/test.txt | head -20
timeout 60 "$B/ft-bench-chain-cuda" --check 2>&1 | tee $R/check.txt
models_wait
Q=$M/qwen3moe-30b-nvfp4.gguf
AB_BUDGET=330 ab_rounds FT_MOE_FUSED_DECODE "1 0" 3 $Q -p 0 -n 128 -r 2 --bw-gbs 4562
same_tokens FT_MOE_FUSED_DECODE $Q
budget 380 "chain probe" && timeout 60 "$B/ft-bench-chain-cuda" 2>&1 | tee $R/chain.md
llama_wait 470
if [ -x "${LB:-}" ] && budget 500 "llama-bench"; then
  log "llama-bench qwen3moe"
  timeout 80 "$LB" -m "$Q" -p 512 -n 128 -ngl 99 -fa 1 -r 2 -o md 2>>"$R/lb.err" | tee -a "$R/lb_raw.md" | rows | tee -a "$R/llama-bench.md"
  log "ft bench qwen3moe (same call, FT_MOE_FUSED_DECODE=1)"
  FT_MOE_FUSED_DECODE=1 timeout 60 "$B/ft" bench -m $Q --device cuda -p 512 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
fi
finish resa
