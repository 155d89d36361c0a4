#!/usr/bin/env bash
# Session 27, call 1 (binaries of main + three probes: FT_LEAN_XR -- the routed expert gate|up launch's activations in
# registers, loaded right after its PDL wait; FT_TMA_X1 -- the one-pass activation row in gemv_mma_tma.cu, Qwen3-30B-A3B's
# qkv; FT_SMEM_CARVEOUT -- one shared-memory carveout for every PDL launch): the GEMV / MoE / GPU-vs-CPU tests under
# the probes, 64 greedy tokens under each against the default, tg128 alternating on both models.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session27/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
log "test_cuda (GEMV, lean, tma, tiled, MoE, GPU vs CPU) under FT_LEAN_XR=1 FT_TMA_X1=1 FT_SMEM_CARVEOUT=100"
FT_LEAN_XR=1 FT_TMA_X1=1 FT_SMEM_CARVEOUT=100 gpu_tests 150 'CudaGemv*:CudaNvfp4Tiled.*:*Moe*:*GpuVsCpu*'
models_wait
for e in FT_LEAN_XR=1 FT_TMA_X1=1 FT_SMEM_CARVEOUT=100; do tokens_under "$e" $Q; done
tokens_under FT_SMEM_CARVEOUT=100 $L
AB_BUDGET=420 ab_envs 2 $Q - FT_LEAN_XR=1 FT_TMA_X1=1 FT_SMEM_CARVEOUT=100 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=520 ab_envs 2 $L - FT_SMEM_CARVEOUT=100 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resa
