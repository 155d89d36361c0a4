#!/usr/bin/env bash
# Session 34, call 6: does a longer ring pay where the plan leaves one block an SM? Qwen3-30B-A3B (4 KV heads:
# 1 block an SM under the 8-KV-head plan) at 2 / 3 stages, and Llama-8B at a 1-block plan with 2 / 3 stages.
R=/tmp/rese
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
models_wait
AB_BUDGET=110 ab_envs 2 "$Q" - "FT_ATTN_MMA_STAGES=3" -- -p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562
AB_BUDGET=150 ab_envs 1 "$L" "FT_ATTN_MMA_PLAN=1,128" "FT_ATTN_MMA_PLAN=1,128 FT_ATTN_MMA_STAGES=3" -- \
  -p 0 -n 128 -d 4096,16384 -r 2 --bw-gbs 4562
finish rese
