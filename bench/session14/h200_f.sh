#!/usr/bin/env bash
# Session 14, call 8: main's head (a9ab8ca): the GEMV tests changed since call 7 (CudaGemvTma*,
# CudaGemvPersist*, CudaGemvBulk*) and ft bench of both models (llama.cpp's figures: call 5).
#   run(command="timeout -s KILL 250 bash bench/session14/h200_f.sh; tar czf $OUT/resf.tgz -C /tmp resf",
#       carry=[".devcarry/pack"])
R=/tmp/resf
source bench/device_common.sh
(model llama8b-nvfp4; model qwen3moe-30b-nvfp4) > $R/models.txt 2>&1 &
MP=$!
(cd $B && timeout 60 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemvTma*:CudaGemvPersist*:CudaGemvBulk*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=" $R/test.txt | head
wait $MP
for m in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  budget 235 "ft bench $m" || break
  timeout 60 "$B/ft" bench -m $M/$m.gguf --device cuda -p 512 -n 128 -d 0,4096 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
done
finish resf
