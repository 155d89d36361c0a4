#!/usr/bin/env bash
# Session 47, call 5: call 4 put wo's last-CTA cost in the norm body itself (~9.4 us a layer: FT_NR_MODE=2, no norm,
# was within 1.7% of the default, the fences nothing). Now the body issues all the row's loads before any sum and the
# last CTA copies the norm weights into its idle ring by cp.async beside them (one L2 round trip for both, not ~8).
# FT_NR_MODE bits: 1 one acq_rel ticket a CTA (no fences), 4 the early PDL trigger, 8 the weights from global memory
# (unstaged). Tests and tokens first, then Llama-8B tg128 alternating.
#   cmake --build build-cuda -j2 --target ft test_cuda
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session47/call5.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res5
source bench/device_common.sh
gpu_preamble 60 'CudaNormCta.*:GpuNvfp4Tiled.*' llama8b-nvfp4
for e in "FT_NORM_CTA=1" "FT_NORM_CTA=1 FT_NR_MODE=1" "FT_NORM_CTA=1 FT_NR_MODE=5"; do tokens_under "$e" "$L"; done
S=("FT_NORM_CTA=1 FT_NR_MODE=1" "FT_NORM_CTA=1 FT_NR_MODE=5" "FT_NORM_CTA=1 FT_NR_MODE=9" "FT_NORM_CTA=1")
AB_BUDGET=250 ab_envs 6 "$L" "-" "${S[@]}" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
log "ft rows:"; cat "$R/ft.md"
finish res5
