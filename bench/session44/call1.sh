#!/usr/bin/env bash
# Session 44, call 1: the decode attention's CTAs stream the next piece of gate|up into L2
# (FT_ATTN_L2_AHEAD=MB, past wo's 8 MB; 0 = off, main's behaviour) on Llama-8B tg128, sizes alternating;
# the same 64 greedy tokens on and off; chain traces with it off / on. On an H200 first: main's chain trace
# (session 43's prepared h200_next.sh, shortened: no ncu), the wo L2-ahead sizes, the qkv stages 3 vs 2.
# Binaries of a -DFT_CHAIN_TRACE=ON build:
#   cmake --build build-trace -j2 --target ft ft-bigmodel && PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-trace
#   run(command="timeout -s KILL 560 bash bench/session44/call1.sh; tar czf $OUT/res1.tgz -C /tmp res1",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res1
source bench/device_common.sh
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
if [[ $GPU == *H200* ]]; then models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4; else models_bg llama8b-nvfp4; fi
models_wait
tokens_under "FT_ATTN_L2_AHEAD=16" "$L"
tokens_under "FT_ATTN_L2_AHEAD=32" "$L"
if [[ $GPU == *H200* ]]; then
  S2="FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,2,57344"
  ab_envs 1 "$L" "FT_CHAIN_TRACE=$R/base" "FT_CHAIN_TRACE=$R/k2a FT_DEBUG_SKIP=attn,norm2" \
    "FT_CHAIN_TRACE=$R/off FT_FFN_L2_AHEAD=0" "FT_CHAIN_TRACE=$R/a16 FT_ATTN_L2_AHEAD=16" \
    -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
  ab_values FT_ATTN_L2_AHEAD "0 8 16 24 32" 3 330 "$L" -p 0 -n 128 -r 2 --bw-gbs 4562
  ab_values FT_FFN_L2_AHEAD "8 0 16" 2 420 "$L" -p 0 -n 128 -r 2 --bw-gbs 4562
  AB_BUDGET=480 ab_envs 3 "$L" "-" "$S2" -- -p 0 -n 128 -r 2 --bw-gbs 4562
  AB_BUDGET=500 ab_envs 1 "$Q" "FT_CHAIN_TRACE=$R/qbase" -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
  chain_sums base k2a off a16 qbase
else
  ab_envs 1 "$L" "FT_CHAIN_TRACE=$R/base" "FT_CHAIN_TRACE=$R/a16 FT_ATTN_L2_AHEAD=16" \
    "FT_CHAIN_TRACE=$R/a32 FT_ATTN_L2_AHEAD=32" -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
  ab_values FT_ATTN_L2_AHEAD "0 8 16 24 32" 5 440 "$L" -p 0 -n 128 -r 2 --bw-gbs 4562
  AB_BUDGET=500 ab_envs 2 "$L" "FT_ATTN_L2_AHEAD=16 FT_FFN_L2_AHEAD=16" "FT_ATTN_L2_AHEAD=0 FT_FFN_L2_AHEAD=16" \
    -- -p 0 -n 128 -r 2 --bw-gbs 4562
  chain_sums base a16 a32
fi
log "ft rows:"; cat "$R/ft.md"
finish res1
