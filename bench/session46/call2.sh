#!/usr/bin/env bash
# Session 46, call 2 (session 45's call5.sh, which did not run, plus the norm folds): main's defaults chosen from
# lazily loaded A/Bs of ~0.5-1.2% (session 45: lazy placement alone moved Llama-8B by up to 2%), asked again with the
# kernels loaded eagerly, 10 rounds alternating: the FFN L2 ahead (FT_FFN_L2_AHEAD=0: off), the SwiGLU block order
# (FT_GLU_ORDER=0: row order), the qkv launch at 2 stages (plan override, floor kept), the norm folds (0: none,
# 3: both; default 2: the attention norm's).
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 420 bash bench/session46/call2.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res2
source bench/device_common.sh
ab_preamble llama8b-nvfp4
S=("FT_FFN_L2_AHEAD=0" "FT_GLU_ORDER=0" "FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,2,57344" "FT_NORM_FOLD=0" "FT_NORM_FOLD=3")
for e in "${S[@]}"; do tokens_under "$e" "$L"; done
AB_BUDGET=400 ab_envs 10 "$L" "-" "${S[@]}" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
log "ft rows:"; cat "$R/ft.md"
finish res2
