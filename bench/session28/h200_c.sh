#!/usr/bin/env bash
# Session 28, call 3 (main + the routed pair at 2,4 -- call 2's winner -- and a dense plan knob,
# FT_GEMV_NVFP4_DENSE_PLAN=R,X: the lean dense one-token launches -- wo on both models -- at R rows an item,
# activations in shared (X 1) or global memory (X 0)): lean / GPU-vs-CPU tests, tokens, tg128 alternating:
# Qwen3-30B-A3B default (expert plan 2,4) against 2,6 and wo's plans, Llama-8B wo's plans.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 330 bash bench/session28/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
log "test_cuda (lean, GPU vs CPU)"
gpu_tests 60 'CudaGemvLean*:*GpuVsCpu*'
models_wait
tokens_under FT_GEMV_NVFP4_EXPERT_PLAN=2,6 $Q
tokens_under FT_GEMV_NVFP4_DENSE_PLAN=2,0 $Q
tokens_under FT_GEMV_NVFP4_DENSE_PLAN=1,1 $L
AB_BUDGET=210 ab_envs 3 $Q - FT_GEMV_NVFP4_EXPERT_PLAN=2,6 FT_GEMV_NVFP4_DENSE_PLAN=2,1 FT_GEMV_NVFP4_DENSE_PLAN=1,0 \
  FT_GEMV_NVFP4_DENSE_PLAN=4,1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=300 ab_envs 3 $L - FT_GEMV_NVFP4_DENSE_PLAN=1,1 FT_GEMV_NVFP4_DENSE_PLAN=4,1 FT_GEMV_NVFP4_DENSE_PLAN=2,0 \
  -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resc
