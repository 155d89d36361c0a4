#!/usr/bin/env bash
# Session 16, call 4: the tensor-core decode attention (attn_decode_mma.cuh, decode mode 3), first
# device run: its tests against attention_ref (CudaAttention.MmaDecodeMatchesRef) beside the
# existing decode tests, then ft-bench-attention-cuda's decode table (f16 and bf16; "mma" rows
# against "decode", the engine's dedicated kernel).
#   PACK_ONLY="test_cuda ft-bench-attention-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session16/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
log "tests"
[ -n "${SKIP_TESTS:-}" ] || (cd $B && timeout 150 ./test_cuda --gtest_brief=1 --gtest_filter='CudaAttention.*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|got|want" $R/test.txt | head -20
for kv in f16 bf16; do
  budget 250 "bench $kv" || break
  log "attention bench $kv"
  timeout 60 "$B/ft-bench-attention-cuda" --kv $kv --decode-only 2>&1 | tee $R/attn_$kv.txt | grep -E "^(decode|mma) |streaming"
done
finish resd
