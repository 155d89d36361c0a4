#!/usr/bin/env bash
# Session 19, call 1: two timing questions about the NVFP4 tensor-core GEMV (gemv_mma.cu).
#  - FT_GEMV_MMA_TILED=1: the weights read as if tile-major ([16-row tile][step][row][144 B]: a warp's
#    step one contiguous 2304-byte piece instead of 16 row pieces of 144 bytes). Timing only: the
#    buffers are not repacked, so the sums (and Llama-8B's tokens) are garbage under it.
#  - FT_NVFP4_NAN_CHECK=0: the scale decoder without the 0x7F / 0xFF fix-up test (the same bits on
#    weights without such scale bytes, as every synthetic and real file we have).
#   PACK_ONLY="ft ft-bench-gemv-cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session19/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg llama8b-nvfp4
for e in - FT_GEMV_MMA_TILED=1 FT_NVFP4_NAN_CHECK=0; do
  log "gemv $e"
  [ "$e" = "-" ] && v="" || v=$e
  env $v timeout 120 "$B/ft-bench-gemv-cuda" --experts > "$R/gemv_${e%%=*}.txt" 2>&1
done
models_wait
AB_BUDGET=520 ab_envs 3 $L - FT_GEMV_MMA_TILED=1 FT_NVFP4_NAN_CHECK=0 "FT_GEMV_MMA_TILED=1 FT_NVFP4_NAN_CHECK=0" -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 530 tokens && same_tokens FT_NVFP4_NAN_CHECK $L 32
finish resa
