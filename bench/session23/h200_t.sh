#!/usr/bin/env bash
# Session 23, call 5: test_cuda (all) alone -- the final call's run (gpu_tests 250) timed out at 250 s with no
# failure printed; per-test times to see whether it is slow or stuck.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 500 bash bench/session23/h200_t.sh; tar czf $OUT/rest.tgz -C /tmp rest",
#       carry=[".devcarry/pack"])
R=/tmp/rest
source bench/device_common.sh
(cd "$B" && timeout 470 ./test_cuda > "$R/test.txt" 2>&1; echo "rc=$?" >> "$R/test.txt")
grep -E "tests? ran|PASSED|FAILED|rc=" "$R/test.txt" | tail -8
grep -E "^\[       OK \]" "$R/test.txt" | sed -E 's/.*\] (.*) \(([0-9]+) ms\)/\2 \1/' | sort -rn | head -12
grep -E "^\[ RUN      \]" "$R/test.txt" | tail -1
finish rest
