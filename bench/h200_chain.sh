#!/usr/bin/env bash
# The launch-chain probe (tools/bench_chain_cuda.cu) in one device call: its check against the host
# model, then a decode step's weight reads as one PDL launch per phase against one persistent
# kernel behind grid barriers (with and without running ahead), both presets, at the default ring
# (6 x 16 KiB, 8 consumer warps: two CTAs fit an SM, so launches overlap) and at a few others.
# Then ft bench -p 0 -n 128 on the two realistic-size files for the same host's real step time.
# Needs ft-bench-chain-cuda in the pack:
#   PACK_ONLY="ft ft-bigmodel ft-bench-chain-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/h200_chain.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
(model llama8b-nvfp4; model qwen3moe-30b-nvfp4) > $R/models.txt 2>&1 &
MP=$!
log "check"
timeout 60 "$B/ft-bench-chain-cuda" --check 2>&1 | tee $R/check.txt
timeout 60 "$B/ft-bench-chain-cuda" --check --stages 3 --chunk-kib 4 --warps 2 2>&1 | tee -a $R/check.txt
for args in "" "--stages 4 --chunk-kib 32" "--stages 12 --chunk-kib 16" "--stages 6 --chunk-kib 16 --warps 4"; do
  budget 300 "chain $args" || break
  log "chain $args"
  timeout 90 "$B/ft-bench-chain-cuda" $args 2>&1 | tee -a $R/chain.md
done
wait $MP
for m in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  budget 370 "ft bench $m" || break
  timeout 60 "$B/ft" bench -m $M/$m.gguf --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | tee -a $R/ft.md
done
finish resc
