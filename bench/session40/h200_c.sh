#!/usr/bin/env bash
# Session 40's last try (~300 s of device time left after six refused starts): wo's norm CTA (FT_NORM_CTA=1) -- its
# kernel and session tests, its greedy tokens and Llama-8B tg128 alternating against the default.
#   run(command="timeout -s KILL 130 bash bench/session40/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$R/log.txt"
models_bg llama8b-nvfp4
log "test_cuda (the norm CTA's tests)"
gpu_tests 60 'CudaNormCta.*:GpuNvfp4Tiled.*'
models_wait
finish resc
tokens_under "FT_NORM_CTA=1" "$L"
AB_BUDGET=122 ab_envs 4 "$L" - "FT_NORM_CTA=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
finish resc
