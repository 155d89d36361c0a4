#!/usr/bin/env bash
# Session 11, call 6: the bulk GEMV with its row scales preloaded, and its copy pattern alone
# ("rows" in --sol) beside the one-wave bulk read: is the loss in the copies or in the compute?
#   run(command="timeout -s KILL 400 bash bench/session11/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
(cd $B && timeout 60 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemvBulk*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|exception" $R/test.txt | head -8
BULK_OK=1; grep -q "FAILED\|rc=124\|rc=137" $R/test.txt && BULK_OK=0
timeout 150 $B/ft-bench-gemv-cuda --sol --launches 40 --pool-gib 0.5 > $R/sol.txt 2>&1; grep -E "^\| [0-9]|note|rror" $R/sol.txt | cut -c1-360
model llama8b-nvfp4
L=$M/llama8b-nvfp4.gguf
for v in "" 1 "2,8,4" "2,16,4"; do
  [ -n "$v" ] && [ $BULK_OK = 0 ] && break
  log "FT_GEMV_NVFP4_BULK=$v"
  FT_GEMV_NVFP4_BULK=$v timeout 45 "$B/ft" bench -m $L --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
done
finish rese
