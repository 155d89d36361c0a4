#!/usr/bin/env bash
# Session 16, final call (7): bench/h200_final.sh, which this script held line for line when it ran
# (the test step has since become device_common.sh's gpu_tests) -- the whole GPU test suite and
# issue 3's figures at depth 0 / 4096 / 16384 beside llama.cpp's CUDA build.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 430 bash bench/session16/h200_final.sh; tar czf $OUT/resf.tgz -C /tmp resf",
#       carry=[".devcarry/pack"])
exec bash "$(dirname "$0")/../h200_final.sh"
