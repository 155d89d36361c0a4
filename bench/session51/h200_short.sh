#!/usr/bin/env bash
# Session 51, for an H200 when too little device time is left for llama.cpp's build (~230 s): h200.sh without the
# build, the full test suite and llama-bench -- ft's figures only (llama.cpp's H200 figures: session 41's).
#   run(command="timeout -s KILL 260 bash bench/session51/h200_short.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res51s
source bench/device_common.sh
source bench/session51/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
kernels_and_ab 120 160
ft_bench_each 245 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
snap
finish res51s
