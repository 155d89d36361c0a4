#!/usr/bin/env bash
# A launch-plan sweep on the issue-3 models (session 28: two plans set before the kernels they steer were reshaped
# had turned from right to wrong, +1.2% and +0.5-1.4% once swept again). Llama-8B's three tiled tensor-core GEMVs at
# other warps x stages (FT_GEMV_NVFP4_TILED_PLAN="ROWSxK=W,S": qkv 6144x4096 and gate|up 28672x4096 at 4 x 2 by the
# plan, down 4096x14336 at 8 x 3) and wo's rows (FT_GEMV_NVFP4_DENSE_PLAN=R,0); tokens under one of each, tg128
# alternating, 3 rounds.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/h200_plans.sh; tar czf $OUT/resp.tgz -C /tmp resp",
#       carry=[".devcarry/pack"])
R=/tmp/resp
source bench/device_common.sh
models_bg llama8b-nvfp4
models_wait
tokens_under FT_GEMV_NVFP4_TILED_PLAN="6144x4096=8,3;28672x4096=8,2;4096x14336=16,2" $L
AB_BUDGET=280 ab_envs 3 $L - \
  FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,3 FT_GEMV_NVFP4_TILED_PLAN=6144x4096=8,2 FT_GEMV_NVFP4_TILED_PLAN=6144x4096=8,3 \
  FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,3 FT_GEMV_NVFP4_TILED_PLAN=28672x4096=4,4 FT_GEMV_NVFP4_TILED_PLAN=28672x4096=8,2 \
  FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,2 FT_GEMV_NVFP4_TILED_PLAN=4096x14336=8,4 FT_GEMV_NVFP4_TILED_PLAN=4096x14336=4,3 \
  FT_GEMV_NVFP4_TILED_PLAN=4096x14336=16,2 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resp
