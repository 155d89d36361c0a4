#!/usr/bin/env bash
# Session 31, call 8: why Llama-8B's down -> qkv pair needs a launch between them (calls 5-6: without the attention
# norm a layer takes 3.7 us longer; with an empty launch in its place, as long as with the norm). A -DFT_CHAIN_TRACE=ON
# build (cuda/chain_trace.h; build-trace, packed with PACK_ONLY="ft ft-bigmodel") records every launch's release in
# the decode chain; bench/chain_trace.py gives each position's span (release to the next release) and early (how long
# block 0 sat parked). tg128 -p 0 --ctx-size 4096 -r 1: as is, without norm1, without norm1 with a spacer before
# qkv, without norm2.
R=/tmp/rese
source bench/device_common.sh
models_bg llama8b-nvfp4
models_wait
ab_envs 1 "$L" "FT_CHAIN_TRACE=$R/base" "FT_CHAIN_TRACE=$R/k1 FT_DEBUG_SKIP=norm1" \
  "FT_CHAIN_TRACE=$R/k1s FT_DEBUG_SKIP=norm1 FT_DEBUG_SPACER=qkv" "FT_CHAIN_TRACE=$R/k2 FT_DEBUG_SKIP=norm2" -- \
  -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
chain_sums base k1 k1s k2
finish rese
