#!/usr/bin/env bash
# Session 41's third call, main's binaries (124957b, the pack of call 2): two defaults measured on an H100 only or
# split between GPUs, now on an H200 with more rounds -- the SwiGLU tail's block order (session 39: +0.5% on an
# H100, never on an H200; FT_GLU_ORDER=0 is row order) and both norm folds (FT_NORM_FOLD=3; session 40: +0.25% on
# an H200, -1.0% on an H100). Llama-8B tg128, 6 rounds alternating.
#   run(command="timeout -s KILL 200 bash bench/session41/h200_c.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resc
source bench/device_common.sh
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4
models_wait
AB_BUDGET=170 ab_envs 6 "$L" - "FT_GLU_ORDER=0" "FT_NORM_FOLD=3" -- -p 0 -n 128 -r 2 --bw-gbs 4562
finish resc
