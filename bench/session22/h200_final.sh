#!/usr/bin/env bash
# Session 22, final call: main's head -- the whole GPU test suite and issue 3's figures at depth 0 / 4096 / 16384
# beside llama.cpp v0.5.0's CUDA build in the same call (bench/h200_final.sh's steps) -- and, while llama-bench
# builds, the routing A/B: the fast route (default) / the exact rounds (FT_MOE_ROUTE_FAST=0) / no routing
# (FT_DEBUG_SKIP=route) / routing whose ids are not used (FT_DEBUG_SKIP=route_ids: the experts stay the last
# step's, so the routing's own cost apart from the experts changing).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 450 bash bench/session22/h200_final.sh; tar czf $OUT/resf.tgz -C /tmp resf",
#       carry=[".devcarry/pack"])
R=/tmp/resf
source bench/device_common.sh
llama_build_bg
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda (all)"
gpu_tests 250
models_wait
ft_bench_each 300 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
AB_BUDGET=350 ab_envs 2 $Q - FT_MOE_ROUTE_FAST=0 FT_DEBUG_SKIP=route FT_DEBUG_SKIP=route_ids -- -p 0 -n 128 -r 1 --bw-gbs 4562
llama_wait 365
if [ -x "${LB:-}" ]; then
  for f in $L $Q; do
    budget 410 "llama-bench $f" || break
    log "llama-bench $(basename "$f")"
    timeout 100 "$LB" -m "$f" -p 512 -n 128 -d 0,4096,16384 -ngl 99 -fa 1 -r 2 -o md 2>>"$R/lb.err" |
      tee -a "$R/lb_raw.md" | rows | tee -a "$R/llama-bench.md"
  done
fi
finish resf
