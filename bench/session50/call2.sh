#!/usr/bin/env bash
# Session 50 call 2 (~220 s): the lane-major layout after call 1's two mends -- the scales copied 16 bytes a lane by
# lanes 0..15 (call 1's per-lane 8-byte cp.async is .ca, L1-allocating: Llama-8B tg128 -2.2%) and the dequantiser's
# threads mapped a CTA to a piece (pp512 -36%): tests, the kernels from HBM and L2, Llama-8B pp512 + tg128
# FT_NVFP4_LANES=0 / 1 alternating (eagerly loaded), then Qwen3-30B-A3B the same, two rounds. No llama.cpp build
# (call 1 ran it in this session, on the same kind of card).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 260 bash bench/session50/call2.sh", carry=[".devcarry/pack"])
R=/tmp/res50b
source bench/device_common.sh
source bench/session49/probes.sh
gpu_preamble 100 'CudaNvfp4Lanes.*:GpuNvfp4Lanes.*:*Nvfp4Scan.*:CudaNvfp4Tiled.*' llama8b-nvfp4 qwen3moe-30b-nvfp4
snap res50b
for m in "--pool-gib 1" "--copies 1"; do
  f=$R/direct_$(echo "$m" | tr -d ' -').txt
  log "ft-bench-gemv-cuda --direct $m"
  timeout 70 "$B/ft-bench-gemv-cuda" --direct $m > "$f" 2>&1; echo "rc=$?" >> "$f"
  grep -E "read|rc=|(tiled clean|lanes).*\| [0-9]" "$f" | grep -E "read|rc=|plan|tiled clean (dep )?\|" | cut -c1-100
done
snap res50b
tokens_under "FT_NVFP4_LANES=1" "$L"
AB_BUDGET=170 ab_envs 8 "$L" "FT_NVFP4_LANES=0" "FT_NVFP4_LANES=1" -- -p 512 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
snap res50b
AB_BUDGET=215 ab_envs 2 "$Q" "FT_NVFP4_LANES=0" "FT_NVFP4_LANES=1" -- -p 512 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$Q"
finish res50b
