#!/usr/bin/env bash
# Session 26, call 4 (binaries of wip/s26-bulk: the FT_MMA_X1 probe): the tensor-core GEMVs (gemv_mma.cu tiled,
# gemv_mma_tma.cu) load the activation row in one pass after the PDL wait (fragment words and scales together: one
# L2 round trip instead of two or three). Same bits. Kernel alone (dep mode), tokens, tg128 alternating on both models.
#   PACK_ONLY="ft ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 280 bash bench/session26/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
for e in FT_MMA_X1=0 FT_MMA_X1=1 FT_MMA_X1=0 FT_MMA_X1=1; do
  log "$e ft-bench-gemv-cuda --tiled"
  env $e timeout 40 "$B/ft-bench-gemv-cuda" --tiled --pool-gib 1 > "$R/tiled_$e.txt" 2>&1
  grep -E "^\| tiled .* n3/" "$R/tiled_$e.txt" | awk -F'|' '{print $5, $7, $9, $11}'
done
while [ ! -f $L ] || ! grep -q bytes_per_token $M/llama8b-nvfp4.info 2>/dev/null; do sleep 1; done
for v in 0 1; do
  FT_MMA_X1=$v timeout 60 "$B/ft" generate --model $L --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 24 \
    --temperature 0 --ignore-eos --json 2>/dev/null | grep -o '"tokens":\[[^]]*\]' > "$R/gen_$v.txt"
  log "x1 $v: $(cat "$R/gen_$v.txt")"
done
AB_BUDGET=150 ab_envs 3 $L FT_MMA_X1=0 FT_MMA_X1=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
models_wait
for v in 0 1; do
  FT_MMA_X1=$v timeout 60 "$B/ft" generate --model $Q --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 24 \
    --temperature 0 --ignore-eos --json 2>/dev/null | grep -o '"tokens":\[[^]]*\]' > "$R/genq_$v.txt"
  log "qwen x1 $v: $(cat "$R/genq_$v.txt")"
done
AB_BUDGET=260 ab_envs 3 $Q FT_MMA_X1=0 FT_MMA_X1=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resd
