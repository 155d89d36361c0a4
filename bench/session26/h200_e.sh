#!/usr/bin/env bash
# Session 26, call 5 (binaries of wip/s26-bulk: FT_MMA_X1 on the 8-warp tiled instances only -- Llama-8B's down
# projection; call 4 found the one-pass activation load 3% faster alone there, 4-6% slower on the 4-warp shapes).
#   PACK_ONLY="ft ft-bigmodel ft-bench-gemv-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 200 bash bench/session26/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
models_bg llama8b-nvfp4
for e in FT_MMA_X1=0 FT_MMA_X1=1 FT_MMA_X1=0 FT_MMA_X1=1; do
  log "$e ft-bench-gemv-cuda --tiled"
  env $e timeout 40 "$B/ft-bench-gemv-cuda" --tiled --pool-gib 1 > "$R/tiled_$e.txt" 2>&1
  grep -E "^\| tiled .* n3/" "$R/tiled_$e.txt" | awk -F'|' '{print $5, $7, $9, $11}'
done
models_wait
for v in 0 1; do
  FT_MMA_X1=$v timeout 60 "$B/ft" generate --model $L --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 24 \
    --temperature 0 --ignore-eos --json 2>/dev/null | grep -o '"tokens":\[[^]]*\]' > "$R/gen_$v.txt"
  log "x1 $v: $(cat "$R/gen_$v.txt")"
done
AB_BUDGET=150 ab_envs 4 $L FT_MMA_X1=0 FT_MMA_X1=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish rese
