#!/usr/bin/env bash
# Session 12, call 9: the position / rope table / attention plan read before pdl_wait in the
# rope and decode-attention kernels (FT_PDL_EARLY=0: after it, as before): GPU tests, Llama-8B
# and Qwen3-30B-A3B A/B at depth 0 and 4096.
#   run(command="timeout -s KILL 420 bash bench/session12/h200_i.sh; tar czf $OUT/resi.tgz -C /tmp resi",
#       carry=[".devcarry/pack"])
R=/tmp/resi
source bench/device_common.sh
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 --gtest_filter='CudaAttention*:CudaOpsRope*:*GpuVsCpu*:*GpuBatch*:*GpuSession*:*Gemma4*:*Qwen35*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|exception" $R/test.txt | head -16
model llama8b-nvfp4; model qwen3moe-30b-nvfp4
for round in 1 2; do
  for m in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
    for v in 1 0; do
      budget 380 "$m $v" || break
      log "$m FT_PDL_EARLY=$v round $round"
      FT_PDL_EARLY=$v timeout 60 "$B/ft" bench -m $M/$m.gguf --device cuda -p 0 -n 128 -d 0,4096 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
    done
  done
done
finish resi
