#!/usr/bin/env bash
# Session 11, call 7: the bulk GEMV with one polling lane per consumer warp (FT_GEMV_BULK_POLL=all
# for the old all-lanes wait), kernels and Llama-8B end to end.
#   run(command="timeout -s KILL 300 bash bench/session11/h200_f.sh; tar czf $OUT/resf.tgz -C /tmp resf",
#       carry=[".devcarry/pack"])
R=/tmp/resf
source bench/device_common.sh
(cd $B && timeout 60 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemvBulk*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|exception" $R/test.txt | head -8
BULK_OK=1; grep -q "FAILED\|rc=124\|rc=137" $R/test.txt && BULK_OK=0
for poll in one all; do
  [ $BULK_OK = 1 ] || break
  [ $poll = all ] && export FT_GEMV_BULK_POLL=all
  log "poll $poll"
  timeout 100 $B/ft-bench-gemv-cuda --sol --launches 40 --pool-gib 0.5 > $R/sol_$poll.txt 2>&1; grep -E "^\| [0-9]|note|rror" $R/sol_$poll.txt | cut -c1-360
done
unset FT_GEMV_BULK_POLL
model llama8b-nvfp4
L=$M/llama8b-nvfp4.gguf
for v in "" "2,16,4" "2,8,4" 1; do
  [ -n "$v" ] && [ $BULK_OK = 0 ] && break
  log "FT_GEMV_NVFP4_BULK=$v"
  FT_GEMV_NVFP4_BULK=$v timeout 45 "$B/ft" bench -m $L --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
done
finish resf
