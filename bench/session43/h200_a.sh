#!/usr/bin/env bash
# Session 43, call 1: the chain trace of main (wo's L2 ahead on by default since 3b6d2d1) -- as is, without the
# FFN norm, without the attention, without both (FT_DEBUG_SKIP: garbage tokens, times only) -- the L2-ahead sizes
# against off, FT_PDL_EARLY (the FFN norm / wo's CTAs releasing their next launch before their PDL wait), a one-round look at the short-context attention knobs, Qwen3-30B-A3B traced, ncu last if time is left.
# Binaries of a -DFT_CHAIN_TRACE=ON build (the trace costs nothing measurable, session 23):
#   cmake -S . -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DFT_CUDA=ON -DFT_CHAIN_TRACE=ON
#   cmake --build build-trace -j2 --target ft ft-bigmodel
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-trace
#   run(command="timeout -s KILL 540 bash bench/session43/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resa
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
tokens_under "FT_FFN_L2_AHEAD=0" "$L"
tokens_under "FT_PDL_EARLY=3" "$L"
ab_envs 1 "$L" "FT_CHAIN_TRACE=$R/base" "FT_CHAIN_TRACE=$R/k2 FT_DEBUG_SKIP=norm2" \
  "FT_CHAIN_TRACE=$R/ka FT_DEBUG_SKIP=attn" "FT_CHAIN_TRACE=$R/k2a FT_DEBUG_SKIP=attn,norm2" \
  "FT_CHAIN_TRACE=$R/off FT_FFN_L2_AHEAD=0" "FT_CHAIN_TRACE=$R/e3 FT_PDL_EARLY=3" \
  -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
ab_values FT_PDL_EARLY "0 1 2 3" 3 250 "$L" -p 0 -n 128 -r 2 --bw-gbs 4562
ab_values FT_FFN_L2_AHEAD "0 8 16" 3 320 "$L" -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=370 ab_envs 1 "$L" "-" "FT_ATTN_DECODE_ROWS=2" "FT_ATTN_PRE_L1=1" "FT_ATTN_PRE_L1=2" \
  "FT_ATTN_STAGE_KEYS=0" "FT_ATTN_MIN_CHUNK=64" "-" -- -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=410 ab_envs 1 "$Q" "FT_CHAIN_TRACE=$R/qbase" "-" -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
chain_sums base k2 ka k2a off e3 qbase
budget 420 ncu && ncu_sass 'nvfp4_mma_kernel|attn|lean_slab|rmsnorm' 200 12
log "ft rows:"; cat "$R/ft.md"
finish resa
