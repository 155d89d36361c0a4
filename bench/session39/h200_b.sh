#!/usr/bin/env bash
# Session 39 calls 1-4 (call 4 without the gate|up cap): the step flow gate|up -> down (cuda/gemv_flow.cuh, FT_GEMV_FLOW=1; new, not yet run on
# a GPU): its GPU tests (CudaGemvFlow.*: the pair's bits equal the plain pair's, counters re-armed), greedy
# tokens against the default, then Llama-8B tg128 alternating, 3 rounds: the default; the flow; the flow with
# gate|up capped at 6 blocks an SM (room for the down projection's blocks sooner); the flow with the down
# projection at 3 stages (85 KB a block instead of 104).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda   (llama-src moved out of the pack)
#   run(command="timeout -s KILL 560 bash bench/session39/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg llama8b-nvfp4
log "test_cuda (changed suites)"
gpu_tests 200 "CudaGemvFlow.*:CudaNvfp4Tiled.*:CudaNormFold.*:CudaGemv*"
models_wait
tokens_under "FT_GEMV_FLOW=1" "$L"
AB_BUDGET=520 ab_envs 3 "$L" - "FT_GEMV_FLOW=1" "FT_GEMV_FLOW=1 FT_GEMV_NVFP4_TILED_PLAN=4096x14336=0,3,0" -- \
  -p 0 -n 128 -r 2 --bw-gbs 4562
finish resb
