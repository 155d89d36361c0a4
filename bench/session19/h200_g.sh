#!/usr/bin/env bash
# Session 19, call 7: call 6 put the decode attention at ~12 us a layer inside the chain at short
# context (Llama-8B). Its chunks of 32 keys make 4 live chunks at 128 keys, and so partials, tickets
# and a merge; FT_ATTN_MIN_CHUNK=N makes chunks of at least N keys. tg128 (0..128 keys) over N,
# alternating, both models; greedy tokens with and without.
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 400 bash bench/session19/h200_g.sh; tar czf $OUT/resg.tgz -C /tmp resg",
#       carry=[".devcarry/pack"])
R=/tmp/resg
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
M=FT_ATTN_MIN_CHUNK
AB_BUDGET=150 ab_envs 2 $L - $M=64 $M=128 $M=256 $M=512 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=290 ab_envs 2 $Q - $M=64 $M=128 $M=256 $M=512 -- -p 0 -n 128 -r 1 --bw-gbs 4562
AB_BUDGET=330 ab_envs 1 $L - $M=256 -- -p 0 -n 128 -d 1024 -r 1 --bw-gbs 4562
budget 340 tokens && SAME=1 && for f in $L $Q; do
  for v in 0 256; do
    env $M=$v timeout 60 "$B/ft" generate --model "$f" --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 32 \
      --temperature 0 --ignore-eos --json > "$R/gen_$(basename $f .gguf)_$v.json" 2>>"$R/ft.err"
  done
  python3 -c "
import json; a=json.load(open('$R/gen_$(basename $f .gguf)_0.json'))['tokens']; b=json.load(open('$R/gen_$(basename $f .gguf)_256.json'))['tokens']
print('$(basename $f)', 'min chunk 0 / 256:', 'same %d tokens' % len(a) if a == b else 'DIFFER', a, b)" | tee -a "$R/log.txt"
done
finish resg
