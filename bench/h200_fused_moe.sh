#!/usr/bin/env bash
# First device call of the session after 15: the one-launch MoE experts (FT_MOE_FUSED_DECODE,
# cuda/moe_decode_fused.cu) and the launch-chain probe (ft-bench-chain-cuda), both written without
# a device. Their tests first (CudaMoeFusedDecode.*: memcmp against the three launches;
# ft-bench-chain-cuda --check), then Qwen3-30B-A3B tg128 with FT_MOE_FUSED_DECODE 0 / 1
# alternating and the same 48 greedy tokens on and off, then the probe's table.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-chain-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 500 bash bench/h200_fused_moe.sh; tar czf $OUT/resm.tgz -C /tmp resm",
#       carry=[".devcarry/pack"])
R=/tmp/resm
source bench/device_common.sh
(model qwen3moe-30b-nvfp4) > $R/models.txt 2>&1 &
MP=$!
log "tests"
(cd $B && timeout 120 ./test_cuda --gtest_brief=1 --gtest_filter='CudaMoeFusedDecode*:CudaGemvNvfp4.Pair*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differ|exception" $R/test.txt | head -20
timeout 60 "$B/ft-bench-chain-cuda" --check 2>&1 | tee $R/check.txt
wait $MP; cat $R/models.txt
Q=$M/qwen3moe-30b-nvfp4.gguf
AB_BUDGET=300 ab_rounds FT_MOE_FUSED_DECODE "1 0" 3 $Q -p 0 -n 128 -r 2 --bw-gbs 4562
same_tokens FT_MOE_FUSED_DECODE $Q
budget 400 "chain probe" && timeout 90 "$B/ft-bench-chain-cuda" 2>&1 | tee $R/chain.md
budget 440 "chain probe, 1 CTA a SM" && timeout 50 "$B/ft-bench-chain-cuda" --stages 12 2>&1 | tee -a $R/chain.md
finish resm
