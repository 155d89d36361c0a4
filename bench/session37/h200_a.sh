#!/usr/bin/env bash
# Session 37 call 1: the GPU tests of what this session removed or changed (two tiles a CTA and the cluster
# tail gone; CudaAttention.MmaDecodeLeastChunkTakesEffect reads kMmaDecodeMinChunk), then Llama-8B's wo
# (4096x4096) tiled on the tensor-core kernel (FT_NVFP4_TILE=all) against the lean slab kernel, alternating:
# session 19 measured the slab faster alone (6.44 against 7.92 us), before the K32 mma and the one-pass build.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda   (no llama-src in the pack)
#   run(command="timeout -s KILL 400 bash bench/session37/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4
log "test_cuda (changed suites)"
gpu_tests 150 "CudaNvfp4Tiled.*:CudaNormFold.*:CudaAttention.*:CudaGemv*"
models_wait
tokens_under "FT_NVFP4_TILE=all" "$L"
AB_BUDGET=330 ab_envs 3 "$L" - "FT_NVFP4_TILE=all" -- -p 0 -n 128 -r 2 --bw-gbs 4562
finish resa
