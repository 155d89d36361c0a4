#!/usr/bin/env bash
# Session 21, final call: main's head -- the whole GPU test suite and issue 3's figures at depth 0 / 4096 / 16384
# beside llama.cpp v0.5.0's CUDA build in the same call (bench/h200_final.sh's steps) -- and, while llama-bench
# builds, call 5's A/B (h200_e.sh, whose own call found no machine): the lean expert gate|up launch's rows an
# item and blocks an SM (FT_GEMV_NVFP4_EXPERT_PLAN=R,B; the plan's 2,6) and the norm + router as two launches.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 440 bash bench/session21/h200_final.sh; tar czf $OUT/resf.tgz -C /tmp resf",
#       carry=[".devcarry/pack"])
R=/tmp/resf
source bench/device_common.sh
llama_build_bg
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda (all)"
gpu_tests 250
models_wait
ft_bench_each 300 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
AB_BUDGET=345 ab_envs 1 $Q - FT_GEMV_NVFP4_EXPERT_PLAN=1,6 FT_GEMV_NVFP4_EXPERT_PLAN=2,4 FT_GEMV_NVFP4_EXPERT_PLAN=4,4 \
  FT_GEMV_NVFP4_EXPERT_PLAN=1,4 FT_MOE_NORM_ROUTE=0 - -- -p 0 -n 128 -r 1 --bw-gbs 4562
llama_wait 365
if [ -x "${LB:-}" ]; then
  for f in $L $Q; do
    budget 400 "llama-bench $f" || break
    log "llama-bench $(basename "$f")"
    timeout 100 "$LB" -m "$f" -p 512 -n 128 -d 0,4096,16384 -ngl 99 -fa 1 -r 2 -o md 2>>"$R/lb.err" |
      tee -a "$R/lb_raw.md" | rows | tee -a "$R/llama-bench.md"
  done
fi
finish resf
