#!/usr/bin/env bash
# Session 42, call 3: the L2-ahead size near call 2's best (8 MB of 0 / 8 / 16 / 24 / 32 on an H100): 0 / 4 / 8 / 12 MB
# alternating, 4 rounds, Llama-8B tg128 (binaries of call 2).
#   run(command="timeout -s KILL 200 bash bench/session42/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resd
source bench/device_common.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$R/log.txt"
models_bg llama8b-nvfp4
models_wait
ab_values FT_FFN_L2_AHEAD "0 4 8 12" 4 170 "$L" -p 0 -n 128 -r 2 --bw-gbs 4562
finish resd
