#!/usr/bin/env bash
# Session 12, call 4: A/B of the mma GEMV's copy mapping and decoder (FT_GEMV_MMA_COPY = CM:
# bit 0 the 4 x 8 copy mapping, bit 1 the earlier e2m1x8_pn decoder): call 3's row-per-lane
# copies with the FMA-pipe decoder ran 30% slower (mio throttle). Kernel times and Llama-8B.
#   run(command="timeout -s KILL 500 bash bench/session12/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
(cd $B && timeout 90 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemv*:*GpuVsCpu*nvfp4*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|exception" $R/test.txt | head -12
model llama8b-nvfp4
for cm in 1 0 2 3; do
  budget 420 "cm $cm" || break
  log "FT_GEMV_MMA_COPY=$cm"
  FT_GEMV_MMA_COPY=$cm timeout 60 "$B/ft" bench -m $M/llama8b-nvfp4.gguf --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
  FT_GEMV_MMA_COPY=$cm timeout 80 $B/ft-bench-gemv-cuda --experts --launches 40 --pool-gib 0.5 > $R/experts_$cm.txt 2>&1
  grep -E "^\| dense" $R/experts_$cm.txt | grep -E "28672x4096|14336x4096|6144x4096" | grep -E "n3|N3" | awk -F'|' '{print $5, $7, $9, $11}'
done
finish resd
