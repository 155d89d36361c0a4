#!/usr/bin/env bash
# Session 27, call 2 (binaries of wip/s27 + two probes: FT_LEAN_SS -- the routed gate|up launch's slot scale loaded
# when its item is located, before the weights' copies; FT_MMA_YE -- the tiled tensor-core GEMV's old y read before
# the PDL wait in accumulating launches with y_early, Llama-8B's down projection): tests under both, tokens, tg128
# alternating (main's defaults now hold call 1's XR and X1).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session27/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
log "test_cuda (lean, tiled, GEMV, GPU vs CPU) under FT_LEAN_SS=1 FT_MMA_YE=1"
FT_LEAN_SS=1 FT_MMA_YE=1 gpu_tests 150 'CudaGemv*:CudaNvfp4Tiled.*:*GpuVsCpu*'
models_wait
tokens_under FT_LEAN_SS=1 $Q
tokens_under FT_MMA_YE=1 $L
AB_BUDGET=300 ab_envs 4 $Q - FT_LEAN_SS=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=370 ab_envs 4 $L - FT_MMA_YE=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resb
