#!/usr/bin/env bash
# Session 33, call 2: main before the fold (a6aa6c0's ft, "base") against this build at FT_NORM_FOLD 0 / 2 / 3,
# and the FFN fold's wo tail counted per CTA (now) or per warp (FT_NQ_WARP=1, call 1's form); Llama-8B tg128
# -p 0 --ctx-size 4096, 3 rounds alternating. The fold's tests first; tokens under each setting.
R=/tmp/resb
source bench/device_common.sh
xz -dc .devcarry/pack/ft-base.xz > "$B/ft-base" && chmod +x "$B/ft-base"
models_bg llama8b-nvfp4
log "(no test_cuda this call: the pack limit)"

models_wait
for e in FT_NORM_FOLD=0 FT_NORM_FOLD=2 FT_NQ_WARP=1; do tokens_under "$e" "$L"; done
timeout 60 "$B/ft-base" generate --model "$L" --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 --max-tokens 64 \
  --temperature 0 --ignore-eos --json > "$R/gen_base.json" 2>>"$R/ft.err"
python3 -c "
import json; a=json.load(open('$R/gen_base.json'))['tokens']; b=json.load(open('$R/gen_llama8b-nvfp4_FT_NORM_FOLD_0.json'))['tokens']
print('base vs FT_NORM_FOLD=0:', 'same %d tokens' % len(a) if a == b else 'DIFFER')" | tee -a "$R/log.txt"
for round in 1 2 3; do
  for c in base FT_NORM_FOLD=0 FT_NORM_FOLD=2 - FT_NQ_WARP=1; do
    budget 480 "$c" || break
    log "$c round $round"
    if [ "$c" = base ]; then bin="$B/ft-base"; e=""; else bin="$B/ft"; e=$c; [ "$c" = "-" ] && e=""; fi
    env $e timeout 90 "$bin" bench -m "$L" --device cuda -p 0 -n 128 -r 2 --ctx-size 4096 --bw-gbs 4562 2>>"$R/ft.err" |
      rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a "$R/ft.md"
  done
done
finish resb
