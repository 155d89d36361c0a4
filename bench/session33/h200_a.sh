#!/usr/bin/env bash
# Session 33, call 1: the norm fold (cuda/norm_fold.h; FT_NORM_FOLD bits: 1 the FFN norm made by wo + gate|up,
# 2 the attention norm made by the previous down projection + qkv, capped at 4 CTAs an SM by after_gemv).
# test_cuda (all), then Llama-8B tg128 -p 0 --ctx-size 4096 alternating over the four settings, the greedy
# tokens under each against the default (3), and Qwen3-30B-A3B on / off (its MoE layers do not fold: no change).
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda (all)"
gpu_tests 240
models_wait
for e in FT_NORM_FOLD=0 FT_NORM_FOLD=1 FT_NORM_FOLD=2; do tokens_under "$e" "$L"; done
ab_envs 3 "$L" FT_NORM_FOLD=0 FT_NORM_FOLD=3 FT_NORM_FOLD=1 FT_NORM_FOLD=2 -- -p 0 -n 128 -r 2 --ctx-size 4096 --bw-gbs 4562
AB_BUDGET=440 ab_envs 1 "$Q" FT_NORM_FOLD=0 FT_NORM_FOLD=3 -- -p 0 -n 128 -r 2 --ctx-size 4096 --bw-gbs 4562
finish resa
