#!/usr/bin/env bash
# Session 51: one script for whichever card comes (a call for nvidia-h200 gets an H100 most times).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session51/call.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
# Both: the lanes tests, then FT_NVFP4_LANES=0 / 1 alternating (eagerly loaded) on Llama-8B (pp512 + tg128: the
# dequantiser staged in shared memory) and Qwen3-30B-A3B.
# H200 only: llama.cpp v0.5.0's CUDA llama-bench built beside that, then issue 3's depth table (ft under the A/B's
# tg128 winner on Llama-8B) beside llama-bench's.
R=/tmp/res51
source bench/device_common.sh
h200_or_not
gpu_preamble 100 'CudaNvfp4Lanes.*:GpuNvfp4Lanes.*:*Nvfp4Scan.*:CudaNvfp4Tiled.*' llama8b-nvfp4 qwen3moe-30b-nvfp4
tokens_under "FT_NVFP4_LANES=1" "$L"
AB_BUDGET=$([ $H200 = 1 ] && echo 170 || echo 190) ab_envs 6 "$L" "FT_NVFP4_LANES=0" "FT_NVFP4_LANES=1" -- -p 512 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L" | tee "$R/means_llama.txt"
AB_BUDGET=$([ $H200 = 1 ] && echo 240 || echo 260) ab_envs 2 "$Q" "FT_NVFP4_LANES=0" "FT_NVFP4_LANES=1" -- -p 512 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$Q" | tee "$R/means_qwen.txt"
if [ $H200 = 1 ]; then
  best=$(grep -E '^BEST FT_NVFP4_LANES=[01]$' "$R/means_llama.txt" | tail -1 | sed 's/^BEST //')
  [ -n "$best" ] || best=FT_NVFP4_LANES=0
  log "depth table under $best"
  issue3_tail "$best"
fi
finish res51
