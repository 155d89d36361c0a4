#!/usr/bin/env bash
# Session 20, call 4: the decode attention's knobs around the new defaults (keys staged, one row a block):
# FT_ATTN_MIN_CHUNK 64 / 256, FT_ATTN_STAGE_KEYS 64, and what each link of a layer costs inside the chain now
# (FT_DEBUG_SKIP, garbage tokens; session 19 call 6's table before these changes), both models, one round.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session20/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
AB_BUDGET=200 ab_envs 1 $L - FT_ATTN_MIN_CHUNK=64 FT_ATTN_MIN_CHUNK=256 FT_ATTN_STAGE_KEYS=64 \
  FT_DEBUG_SKIP=qkv FT_DEBUG_SKIP=attn FT_DEBUG_SKIP=wo FT_DEBUG_SKIP=norm2 FT_DEBUG_SKIP=gateup \
  FT_DEBUG_SKIP=swiglu FT_DEBUG_SKIP=down FT_DEBUG_SKIP=qkv,attn,wo,norm2,gateup,swiglu,down,norm1 - \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=280 ab_envs 1 $Q - FT_ATTN_MIN_CHUNK=64 FT_ATTN_STAGE_KEYS=64 FT_DEBUG_SKIP=qkv FT_DEBUG_SKIP=wo \
  FT_DEBUG_SKIP=experts - -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resd
