#!/usr/bin/env bash
# Session 24, call 1: early PDL triggers (FT_PDL_EARLY=MASK, cuda/pdl.h): the session tests under the
# widest mask, greedy tokens of both issue-3 models under each mask against none, then tg128 A/B,
# alternating in this call.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session24/h200_a.sh; tar czf $OUT/resa.tgz -C /tmp resa",
#       carry=[".devcarry/pack"])
R=/tmp/resa
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4 llama8b-nvfp4
log "session tests, FT_PDL_EARLY=31"
FT_PDL_EARLY=31 gpu_tests 170 '*Session*:*Batch*:*Offload*:*MoeCpu*'
models_wait
# tokens_under MASK FILE: 64 greedy tokens with FT_PDL_EARLY=MASK against the same with 0.
tokens_under() {
  local m=$1 f=$2 b
  b=$(basename "$f" .gguf)
  for v in "$m" 0; do
    FT_PDL_EARLY=$v timeout 60 "$B/ft" generate --model "$f" --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 \
      --max-tokens 64 --temperature 0 --ignore-eos --json > "$R/gen_${b}_$v.json" 2>>"$R/ft.err"
  done
  python3 -c "
import json; a=json.load(open('$R/gen_${b}_$m.json'))['tokens']; b=json.load(open('$R/gen_${b}_0.json'))['tokens']
print('$b FT_PDL_EARLY=$m vs 0:', 'same %d tokens' % len(a) if a == b else 'DIFFER', len(a), len(b))" 2>&1 | tee -a "$R/log.txt"
}
tokens_under 31 $Q
tokens_under 31 $L
AB_BUDGET=440 ab_envs 2 $Q - FT_PDL_EARLY=27 FT_PDL_EARLY=11 "FT_PDL_EARLY=23 FT_MOE_IDS_EARLY=0" \
  "FT_PDL_EARLY=15 FT_MOE_ROUTE_IN_EXPERTS=0" FT_PDL_EARLY=31 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=500 ab_envs 2 $L - FT_PDL_EARLY=7 FT_PDL_EARLY=3 FT_PDL_EARLY=1 -- -p 0 -n 128 -r 1 --bw-gbs 4562
finish resa
