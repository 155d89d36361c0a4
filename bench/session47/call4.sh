#!/usr/bin/env bash
# Session 47, call 4: where wo's last-CTA norm loses its ~14 us a layer (call 3's chain trace: wo's span 18.14 against
# 3.71 us with the early trigger gone, so not gate|up's flood). A probe knob, FT_NR_MODE: bit 0 one acq_rel ticket a
# CTA and no fences (instead of every thread's __threadfence, i.e. fence.sc.gpu, 65,536 of them a launch); bit 1 no
# norm in the last CTA (garbage tokens, times only). Llama-8B tg128 alternating.
#   cmake --build build-cuda -j2 --target ft
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session47/call4.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res4
source bench/device_common.sh
ab_preamble llama8b-nvfp4
tokens_under "FT_NORM_CTA=1 FT_NR_MODE=1" "$L"
S=("FT_NORM_CTA=1" "FT_NORM_CTA=1 FT_NR_MODE=1" "FT_NORM_CTA=1 FT_NR_MODE=2" "FT_NORM_CTA=1 FT_NR_MODE=3" "FT_DEBUG_SKIP=norm2")
AB_BUDGET=230 ab_envs 5 "$L" "-" "${S[@]}" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
log "ft rows:"; cat "$R/ft.md"
finish res4
