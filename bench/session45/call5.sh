#!/usr/bin/env bash
# Session 45, call 5: main's defaults that sessions 39-43 chose from lazily loaded A/Bs of ~0.5-1.2%, each asked again
# with the kernels loaded eagerly (call 3: lazy placement alone moved Llama-8B by up to 2%), 10 rounds alternating:
# the FFN L2 ahead (8 MB; 0 off), the SwiGLU block order (FT_GLU_ORDER=0: row order), the qkv launch's 3 stages
# (2 through the plan override, floor kept).
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session45/call5.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res5
source bench/device_common.sh
ab_preamble llama8b-nvfp4
for e in FT_FFN_L2_AHEAD=0 FT_GLU_ORDER=0 FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,2,57344; do tokens_under "$e" "$L"; done
AB_BUDGET=240 ab_envs 10 "$L" "-" "FT_FFN_L2_AHEAD=0" "FT_GLU_ORDER=0" "FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,2,57344" \
  -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
log "ft rows:"; cat "$R/ft.md"
finish res5
