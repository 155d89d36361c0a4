#!/usr/bin/env bash
# Session 50, one call (~580 s): the lane-major tiled layout (FT_NVFP4_LANES=1, src/cuda/nvfp4_tiled.h "Lanes";
# gemv_mma.cu's LANES instances) on the device, in order of worth; llama.cpp v0.5.0's CUDA llama-bench builds in
# the background meanwhile.
# 1. test_cuda: the lanes tests (repack, GEMV / SwiGLU tail / slab / GEMM against the tiled bits, a session's
#    logits) and the tiled / scan ones (GpuNvfp4Scan.CleanSessionEqualsCheckedOne, edited in session 49, never ran).
# 2. ft-bench-gemv-cuda --direct, from HBM and from L2 (--copies 1): the tiled kernel checked / clean, the lanes
#    instances (plan and forced warps x stages), session 49's register-fed prototype and its cp.async ring.
# 3. Llama-8B: 64 greedy tokens with lanes against the default; tg128 FT_NVFP4_LANES=0 / 1 alternating, eagerly
#    loaded, until the build is done.
# 4. issue 3's rows at depth 0: ft bench (default, and lanes) beside llama-bench, Llama-8B then Qwen3-30B-A3B.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session50/call1.sh", carry=[".devcarry/pack"])
R=/tmp/res50a
source bench/device_common.sh
source bench/session49/probes.sh
llama_build_bg
gpu_preamble 150 'CudaNvfp4Lanes.*:GpuNvfp4Lanes.*:*Nvfp4Scan.*:CudaNvfp4Tiled.*' llama8b-nvfp4 qwen3moe-30b-nvfp4
snap res50a
for m in "--pool-gib 1" "--copies 1"; do
  budget 300 "direct $m" || break
  f=$R/direct_$(echo "$m" | tr -d ' -').txt
  log "ft-bench-gemv-cuda --direct $m"
  timeout 70 "$B/ft-bench-gemv-cuda" --direct $m > "$f" 2>&1; echo "rc=$?" >> "$f"
  grep -E "read|rc=|(tiled|lanes).*\| [0-9]" "$f" | grep -v " dep " | cut -c1-100
done
snap res50a
tokens_under "FT_NVFP4_LANES=1" "$L"
for round in 1 2 3 4 5 6 7 8; do
  [ -f $W/done ] && [ "$round" -gt 3 ] && break
  AB_BUDGET=380 ab_envs 1 "$L" "FT_NVFP4_LANES=0" "FT_NVFP4_LANES=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
done
ab_env_means "$L"
snap res50a
llama_wait 420
for f in $L $Q; do
  for e in "-" "FT_NVFP4_LANES=1"; do
    budget 545 "ft bench $e $f" || break
    log "ft bench $e $(basename "$f")"
    [ "$e" = "-" ] && e=""
    env $e timeout 45 "$B/ft" bench -m "$f" --device cuda -p 512 -n 128 -r 2 --bw-gbs 4562 2>>"$R/ft.err" | rows |
      sed 's/ | cuda (NVIDIA[^|]*//' | sed "s/^/${e:-main} /" | tee -a "$R/ft.md"
  done
  if [ -x "${LB:-}" ] && budget 550 "llama-bench $f"; then
    log "llama-bench $(basename "$f")"
    timeout 40 "$LB" -m "$f" -p 512 -n 128 -ngl 99 -fa 1 -r 2 -o md 2>>"$R/lb.err" | tee -a "$R/lb_raw.md" | rows |
      tee -a "$R/llama-bench.md"
  fi
done
finish res50a
