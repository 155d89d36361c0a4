#!/usr/bin/env bash
# Session 42, call 1: where the decode step goes on the H200, launch by launch (chain trace; no H200 trace since
# session 23), and a first A/B of the FFN norm streaming the head of gate|up into L2 (FT_FFN_L2_AHEAD=MB, off by
# default). Binaries of a -DFT_CHAIN_TRACE=ON build (the trace costs nothing measurable, session 23):
#   cmake -S . -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DFT_CUDA=ON -DFT_CHAIN_TRACE=ON
#   cmake --build build-trace -j2 --target ft ft-bigmodel
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-trace
#   run(command="timeout -s KILL 480 bash bench/session42/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
# Llama-8B tg128 -p 0 --ctx-size 4096 -r 1 traces: as is, without the FFN norm, without the attention
# (FT_DEBUG_SKIP: garbage tokens, times only), with 24 MB ahead; tg128 alternating over the ahead sizes;
# Qwen3-30B-A3B traced as is; ncu's source counters of a Llama-8B step's launches at the end if time is left.
R=/tmp/resa
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
for mb in 8 24; do tokens_under "FT_FFN_L2_AHEAD=$mb" "$L"; done
ab_envs 1 "$L" "FT_CHAIN_TRACE=$R/base" "FT_CHAIN_TRACE=$R/k2 FT_DEBUG_SKIP=norm2" \
  "FT_CHAIN_TRACE=$R/ka FT_DEBUG_SKIP=attn" "FT_CHAIN_TRACE=$R/pf24 FT_FFN_L2_AHEAD=24" \
  -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
AB_BUDGET=260 ab_envs 3 "$L" "-" "FT_FFN_L2_AHEAD=8" "FT_FFN_L2_AHEAD=16" "FT_FFN_L2_AHEAD=24" "FT_FFN_L2_AHEAD=32" \
  -- -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=300 ab_envs 1 "$Q" "FT_CHAIN_TRACE=$R/qbase" "-" -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
chain_sums base k2 ka pf24 qbase
budget 360 ncu && ncu_sass 'nvfp4_mma_kernel|attn|lean_slab|rmsnorm' 200 12
log "ft rows:"; cat "$R/ft.md"
finish resa
