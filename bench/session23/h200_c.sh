#!/usr/bin/env bash
# Session 23, call 3: the experts-changing cost without any GEMV code (tools/bench_tlb_cuda.cu): a pure
# read kernel over one token's 8 experts' gate and up rows a layer, 48 layers x 16 tokens in one graph:
# random / fixed / few experts, separate gate and up banks vs each expert's gate|up contiguous.
#   PACK_ONLY="ft-bench-tlb-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 200 bash bench/session23/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv | tee -a $R/log.txt
(cd $B && timeout 80 ./ft-bench-tlb-cuda > $R/tlb.txt 2>&1; echo "rc=$?" >> $R/tlb.txt)
cat $R/tlb.txt
(cd $B && timeout 80 ./ft-bench-tlb-cuda --tokens 32 > $R/tlb32.txt 2>&1; echo "rc=$?" >> $R/tlb32.txt)
cat $R/tlb32.txt
finish resc
