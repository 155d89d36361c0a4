#!/usr/bin/env bash
# Session 53 call 7 (~150 s, any GPU; on an H200 session 51's h200_short.sh instead: ft's issue-3 figures within the
# ~390 s of device time left): the batch runner on Qwen3-30B-A3B (MoE, fused experts), prompt 32, FT_BATCH_SOLO=1 / 0.
#   run(command="timeout -s KILL 380 bash bench/session53/call7.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
if nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200; then
  exec bash bench/session51/h200_short.sh
fi
R=/tmp/res53h
source bench/device_common.sh
source bench/session53/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg qwen3moe-30b-nvfp4
models_wait
L=$Q  # bb runs on $L
for round in 1 2; do
  budget 300 "round $round" || break
  bb "solo$round" 32 FT_BATCH_SOLO=1
  bb "nosolo$round" 32 FT_BATCH_SOLO=0
done
finish res53h
