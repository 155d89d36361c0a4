#!/usr/bin/env bash
# Session 46, call 3: the decode knobs tuned in sessions 14-36 from lazily loaded A/Bs, asked again with the kernels
# loaded eagerly (session 45), Llama-8B, 3 rounds alternating: the SwiGLU row order again (call 2: +0.6%, within
# noise), the attention's L1 prefetch (1), its rope in a launch of its own (FT_ATTN_ROPE=0), 64 staged keys (default
# 128), the row scales and y read after the PDL wait (FT_GEMV_RS_EARLY=0, FT_GEMV_Y_EARLY=0), wo on the slab kernel
# (FT_GEMV_NVFP4_LEAN_DENSE=0). First the tests of the after-GEMV launch (now counting the device's SMs) and the
# scanned instances (mma_tiled_instance).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 230 bash bench/session46/call3.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res3
source bench/device_common.sh
gpu_preamble 50 'CudaNvfp4Tiled.*:CudaNvfp4Scan.*:GpuNvfp4Scan.*:CudaGemvMma*' llama8b-nvfp4
S=("FT_GLU_ORDER=0" "FT_ATTN_PRE_L1=1" "FT_ATTN_ROPE=0" "FT_ATTN_STAGE_KEYS=64" "FT_GEMV_RS_EARLY=0" "FT_GEMV_Y_EARLY=0"
   "FT_GEMV_NVFP4_LEAN_DENSE=0")
for e in "${S[@]}"; do tokens_under "$e" "$L"; done
AB_BUDGET=200 ab_envs 3 "$L" "-" "${S[@]}" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
log "ft rows:"; cat "$R/ft.md"
finish res3
