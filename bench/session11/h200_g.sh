#!/usr/bin/env bash
# Session 11, call 8 (last): the whole test_cuda and test_moe_cpu on the final binaries.
#   run(command="timeout -s KILL 250 bash bench/session11/h200_g.sh; tar czf $OUT/resg.tgz -C /tmp resg",
#       carry=[".devcarry/pack"])
R=/tmp/resg
source bench/device_common.sh
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 > $R/test_cuda.txt 2>&1; echo "test_cuda rc=$?" >> $R/log.txt)
grep -E "tests? ran|PASSED|FAILED|SKIPPED \[" $R/test_cuda.txt | tail -12
(cd $B && timeout 40 ./test_moe_cpu --gtest_brief=1 > $R/test_moe_cpu.txt 2>&1; echo "test_moe_cpu rc=$?" >> $R/log.txt)
grep -E "tests? ran|PASSED|FAILED" $R/test_moe_cpu.txt | tail -4
finish resg
