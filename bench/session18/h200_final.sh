#!/usr/bin/env bash
# Session 18, final calls: bench/h200_final.sh -- the whole GPU test suite and issue 3's figures at
# depth 0 / 4096 / 16384 beside llama.cpp's CUDA build. Call 6 ran it on b0d661e (the early row
# scales, and the MoE layers' L2 prefetch then on by default); call 8 on main after the prefetch
# went to branch wip/l2-prefetch (call 7).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 430 bash bench/session18/h200_final.sh; tar czf $OUT/resf.tgz -C /tmp resf",
#       carry=[".devcarry/pack"])
exec bash "$(dirname "$0")/../h200_final.sh"
