#!/usr/bin/env bash
# Session 39 call 7: the SwiGLU tail's gate|up in block order (gemv_mma.cu GO, on by default; FT_GLU_ORDER=0 the
# row order) -- call 6 measured it +0.8% as the step flow's producer alone. test_cuda (all), greedy tokens
# against row order, then Llama-8B tg128 alternating, 4 rounds.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda   (llama-src moved out of the pack)
#   run(command="timeout -s KILL 420 bash bench/session39/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
models_bg llama8b-nvfp4
log "test_cuda (all)"
gpu_tests 260
models_wait
tokens_under "FT_GLU_ORDER=0" "$L"
AB_BUDGET=400 ab_envs 4 "$L" - "FT_GLU_ORDER=0" -- -p 0 -n 128 -r 2 --bw-gbs 4562
finish rese
