#!/usr/bin/env bash
# Session 26, call 3 (binaries of wip/s26-bulk after the reverts + two probes): FT_MMA_PRED (the tiled mma
# instance whose tile loads are predicated LDS.128 instead of branches; the same bits) alone and in Llama-8B tg128
# alternating; FT_XQ_REPS=R (ft-bench-gemv-cuda only: R copies of the activation row, CTA b reads b % R) -- is the
# one row every CTA reads an L2 hot spot on the GEMV's path?
#   PACK_ONLY="ft ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 240 bash bench/session26/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
models_bg llama8b-nvfp4
for e in "FT_MMA_PRED=0 FT_XQ_REPS=1" "FT_MMA_PRED=1 FT_XQ_REPS=1" "FT_MMA_PRED=0 FT_XQ_REPS=8" \
         "FT_MMA_PRED=0 FT_XQ_REPS=32" "FT_MMA_PRED=0 FT_XQ_REPS=1"; do
  log "$e ft-bench-gemv-cuda --tiled"
  env $e timeout 40 "$B/ft-bench-gemv-cuda" --tiled --pool-gib 1 > "$R/tiled_${e// /_}.txt" 2>&1
  grep -E "^\| tiled .* n3/" "$R/tiled_${e// /_}.txt" | awk -F'|' '{print $5, $7, $9, $11}'
done
models_wait
for v in 0 1; do
  FT_MMA_PRED=$v timeout 60 "$B/ft" generate --model $L --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 24 \
    --temperature 0 --ignore-eos --json 2>/dev/null | grep -o '"tokens":\[[^]]*\]' > "$R/gen_$v.txt"
  log "pred $v: $(cat "$R/gen_$v.txt")"
done
AB_BUDGET=200 ab_envs 4 $L FT_MMA_PRED=0 FT_MMA_PRED=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resc
