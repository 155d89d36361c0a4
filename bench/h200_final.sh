#!/usr/bin/env bash
# The final call of a session (sessions 16-17 ran it as bench/session1{6,7}/h200_final.sh): main's
# head -- the whole GPU test suite, and issue 3's figures at depth 0 / 4096 / 16384 beside llama.cpp
# v0.5.0's CUDA build in the same call where time allows:
#   ft bench -m F --device cuda -p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562
#   llama-bench -m F -p 512 -n 128 -d 0,4096,16384 -ngl 99 -fa 1 -r 2
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/h200_final.sh; tar czf $OUT/resf.tgz -C /tmp resf",
#       carry=[".devcarry/pack"])
# FINAL_AB=FILE (a session's A/B while llama-bench builds, e.g. bench/session22/final_ab.sh): sourced
# between ft's figures and llama-bench's (ab_envs etc. from bench/device_common.sh; rows into $R/ft.md).
R=/tmp/resf
source bench/device_common.sh
llama_build_bg
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda (all)"
gpu_tests 340  # session 23: 250 s ran out with llama.cpp building beside it; session 30: 300 s (a 362 s build)
models_wait
# ft's figures once the llama.cpp build is done (session 28): session 27's ran beside it, ~1.5% below the same
# binaries' alternating runs on a quiet host; llama-bench always ran after it.
llama_wait 400  # session 30: the build took 362 s (330 s before)
ft_bench_each 450 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
if [ -n "${FINAL_AB:-}" ]; then source "$FINAL_AB"; fi
llama_depth_rows 470 510 $L $Q
finish resf
