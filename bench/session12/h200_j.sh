#!/usr/bin/env bash
# Session 12, call 12: the whole GPU suite on main's last code (kSortStack from stack_need, the
# memory report's percentage helper, the router tests' shared weight rows), and the memory lines.
#   run(command="timeout -s KILL 330 bash bench/session12/h200_j.sh; tar czf $OUT/resj.tgz -C /tmp resj",
#       carry=[".devcarry/pack"])
R=/tmp/resj
source bench/device_common.sh
(cd $B && timeout 280 ./test_cuda --gtest_brief=1 > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|exception" $R/test.txt | tail -12
grep -h "cuda memory" $R/test.txt | tail -3
finish resj
