#!/usr/bin/env bash
# Session 49, one call for everything (~570 s; for when device calls are few): llama.cpp v0.5.0's CUDA llama-bench
# builds in the background while the GPU runs, in order of worth:
# 1. test_cuda on the tiled / scan tests (CudaNvfp4Tiled.AfterGemvLaunchEqualsThePlainOne never ran on a GPU).
# 2. ft-bench-gemv-cuda --direct: the register-fed prototype (tools/gemv_direct_proto.cuh) beside the tiled
#    kernel, checked and clean, from HBM and from L2 (--copies 1), and L2's plain read (--sol --copies 1): does
#    the kernel's own work hold it (session 48's decision rule), and does feeding registers directly pay?
# 3. Llama-8B tg128, FT_NVFP4_SCAN=0 / 1 alternating, eagerly loaded (H100 sessions 44-45: +0.4%, noise; the
#    scanned loop is 264 SASS instructions a step against 338, bench/sass_local.sh), until the build is done.
# 4. issue 3's rows once the build is done: ft bench (main's defaults -- scanned since session 49 -- and
#    FT_NVFP4_SCAN=0) beside llama-bench,
#    Llama-8B then Qwen3-30B-A3B, -p 512 -n 128 at depth 0 (depths 4k / 16k: bench/h200_final.sh).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session49/h200_all.sh", carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
source bench/session49/probes.sh
llama_build_bg
gpu_preamble 45 'CudaNvfp4Tiled.*:GpuNvfp4Tiled.*:*Nvfp4Scan.*' llama8b-nvfp4 qwen3moe-30b-nvfp4
direct_probes
snap resa
# The A/B while llama.cpp builds (both arms beside it alike), until the build is done or 330 s.
for round in 1 2 3 4 5 6; do
  [ -f $W/done ] && break
  AB_BUDGET=330 ab_envs 1 "$L" "FT_NVFP4_SCAN=0" "FT_NVFP4_SCAN=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
done
ab_env_means "$L"
snap resa
llama_wait 400
for f in $L $Q; do
  for e in "-" "FT_NVFP4_SCAN=0"; do
    budget 540 "ft bench $e $f" || break
    log "ft bench $e $(basename "$f")"
    [ "$e" = "-" ] && e=""
    env $e timeout 60 "$B/ft" bench -m "$f" --device cuda -p 512 -n 128 -r 2 --bw-gbs 4562 2>>"$R/ft.err" | rows |
      sed 's/ | cuda (NVIDIA[^|]*//' | sed "s/^/${e:-main} /" | tee -a "$R/ft.md"
  done
  if [ -x "${LB:-}" ] && budget 560 "llama-bench $f"; then
    log "llama-bench $(basename "$f")"
    timeout 60 "$LB" -m "$f" -p 512 -n 128 -ngl 99 -fa 1 -r 2 -o md 2>>"$R/lb.err" | tee -a "$R/lb_raw.md" | rows |
      tee -a "$R/llama-bench.md"
  fi
done
finish resa
