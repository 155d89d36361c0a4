#!/usr/bin/env bash
# Ran on an H100 (session 38 call 1: the H200 was not lent); FT_NORM_FOLD_WIDE and its kernel were removed after it
# (no faster than the ticket tail: benches/h200.md, session 38).
# Session 38 call 1: the GPU tests of what sessions 37-38 changed (two tiles a CTA and the cluster tail
# gone; the norm fold's wide tail new: CudaNormFold.ProducerTailsEqualTheLaunch runs it), then Llama-8B
# tg128, 2 rounds alternating: the default; wo on the tiled tensor-core kernel (FT_NVFP4_TILE=all; session 19
# measured the lean slab faster alone, 6.44 against 7.92 us, before the K32 mma and the one-pass build); the
# FFN norm fold with the wide tail (a 32-row block a CTA of 16 warps: no ticket, no read-back) and with the
# ticket tail (session 36: -1.5% against the default).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda   (no llama-src in the pack)
#   run(command="timeout -s KILL 420 bash bench/session38/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4
log "test_cuda (changed suites)"
gpu_tests 150 "CudaNvfp4Tiled.*:CudaNormFold.*:CudaAttention.*:CudaGemv*"
models_wait
tokens_under "FT_NVFP4_TILE=all" "$L"
tokens_under "FT_NORM_FOLD=3 FT_NORM_FOLD_WIDE=1" "$L"
tokens_under "FT_NORM_FOLD=3" "$L"
AB_BUDGET=390 ab_envs 2 "$L" - "FT_NVFP4_TILE=all" "FT_NORM_FOLD=3 FT_NORM_FOLD_WIDE=1" "FT_NORM_FOLD=3" -- \
  -p 0 -n 128 -r 2 --bw-gbs 4562
finish resa
