#!/usr/bin/env bash
# Session 24, call 1: the SwiGLU in the gate|up launch's epilogue -- MoE (FT_MOE_GLU_FUSED: the routed
# pair, with the down launch routing for itself) and dense (FT_GLU_FUSED: the tiled tensor-core GEMV)
# -- and early PDL triggers (FT_PDL_EARLY=MASK, cuda/pdl.h): their tests, the session tests under the
# widest mask, greedy tokens under each setting against the default, then tg128 A/B, alternating.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 570 bash bench/session24/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
log "epilogue SwiGLU tests"
gpu_tests 60 'CudaGemvLean.*:CudaNvfp4Tiled.*'
cp "$R/test.txt" "$R/test_glu.txt"
log "session tests, FT_PDL_EARLY=31"
FT_PDL_EARLY=31 gpu_tests 120 '*Session*:*Batch*:*Offload*'
models_wait
tokens_under "FT_MOE_GLU_FUSED=0" $Q
tokens_under "FT_PDL_EARLY=31" $Q
tokens_under "FT_GLU_FUSED=0" $L
tokens_under "FT_PDL_EARLY=31" $L
AB_BUDGET=390 ab_envs 2 $Q FT_MOE_GLU_FUSED=0 - FT_PDL_EARLY=11 FT_PDL_EARLY=3 "FT_PDL_EARLY=27 FT_MOE_GLU_FUSED=0" \
  FT_PDL_EARLY=27 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=500 ab_envs 2 $L FT_GLU_FUSED=0 - FT_PDL_EARLY=3 FT_PDL_EARLY=1 "FT_PDL_EARLY=7 FT_GLU_FUSED=0" \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resa
