#!/usr/bin/env bash
# Session 28, call 2 (main 4015e1a + the final script's order): Qwen3-30B-A3B's launch plans again after session 27's
# changes to the routed expert launch (activations in registers, early slot scale) and the bulk-copy qkv (one-pass
# row): the expert gate|up plan (FT_GEMV_NVFP4_EXPERT_PLAN=R,B; default 2,6) and the qkv's chunking
# (FT_GEMV_NVFP4_TMA=1,W,J,S; default 4 warps, the whole range in one chunk), tg128 alternating, 3 rounds.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 300 bash bench/session28/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
models_wait
for e in FT_GEMV_NVFP4_EXPERT_PLAN=1,6 FT_GEMV_NVFP4_EXPERT_PLAN=4,4 FT_GEMV_NVFP4_TMA=1,4,2,2; do tokens_under $e $Q; done
AB_BUDGET=270 ab_envs 3 $Q - FT_GEMV_NVFP4_EXPERT_PLAN=1,6 FT_GEMV_NVFP4_EXPERT_PLAN=2,4 FT_GEMV_NVFP4_EXPERT_PLAN=4,4 \
  FT_GEMV_NVFP4_EXPERT_PLAN=1,4 FT_GEMV_NVFP4_TMA=1,4,2,2 FT_GEMV_NVFP4_TMA=1,8,2,1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resb
