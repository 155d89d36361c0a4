#!/usr/bin/env bash
# Session 47, call 7 (the device time left, ~280 s): session 46's unrun call3.sh cut down -- the one GPU test edited
# after session 46's last device run (CudaNvfp4Tiled.AfterGemvLaunchEqualsThePlainOne), then its seven older knobs
# eagerly loaded, Llama-8B, 2 rounds alternating (main's code).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 190 bash bench/session47/call7.sh", carry=[".devcarry/pack"])
R=/tmp/res7
source bench/device_common.sh
gpu_preamble 30 'CudaNvfp4Tiled.AfterGemvLaunchEqualsThePlainOne' llama8b-nvfp4
S=("FT_GLU_ORDER=0" "FT_ATTN_PRE_L1=1" "FT_ATTN_ROPE=0" "FT_ATTN_STAGE_KEYS=64" "FT_GEMV_RS_EARLY=0" "FT_GEMV_Y_EARLY=0"
   "FT_GEMV_NVFP4_LEAN_DENSE=0")
AB_BUDGET=150 ab_envs 2 "$L" "-" "${S[@]}" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
finish res7
