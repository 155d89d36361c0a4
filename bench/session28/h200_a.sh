#!/usr/bin/env bash
# Session 28, call 1 (binaries of main + three switches, each on by default here): FT_GEMV_ROUTE_SPEC (the routed
# expert gate|up launch's copies started on the route's top-k ids, before its tie check and weights), FT_ARGMAX_SPLIT
# (the decode step's argmax over many CTAs instead of one), FT_STEP_MAPPED (a step's token ids / position read and its
# argmax written through mapped pinned memory instead of three copy nodes). Tests, tokens under each off, tg128
# alternating on both models.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session28/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
log "test_cuda (lean, route, sample, GPU vs CPU, sessions, batch)"
gpu_tests 170 'CudaGemvLean*:CudaOpsSample*:CudaOpsMoeRoute*:*GpuVsCpu*:GpuSampling*:*GpuBatch*:GpuAttentionMma*'
models_wait
for e in FT_GEMV_ROUTE_SPEC=0 FT_ARGMAX_SPLIT=0 FT_STEP_MAPPED=0; do tokens_under $e $Q; done
for e in FT_ARGMAX_SPLIT=0 FT_STEP_MAPPED=0; do tokens_under $e $L; done
AB_BUDGET=390 ab_envs 4 $Q - FT_GEMV_ROUTE_SPEC=0 FT_ARGMAX_SPLIT=0 FT_STEP_MAPPED=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=520 ab_envs 4 $L - FT_ARGMAX_SPLIT=0 FT_STEP_MAPPED=0 "FT_ARGMAX_SPLIT=0 FT_STEP_MAPPED=0" -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resa
