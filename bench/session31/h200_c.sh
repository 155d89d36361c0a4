#!/usr/bin/env bash
# Session 31, call 6: call 5 found Llama-8B's decode 3.7 us a layer SLOWER with the attention norm (a one-CTA launch
# between the down projection and the qkv GEMV) left out, and 2.4 us a layer faster without the FFN norm. Is a
# link's value that it holds the next launch back until the one before has completed? FT_DEBUG_SPACER puts an
# empty one-warp launch before the named links (the same tokens). tg128 -p 0 --ctx-size 4096, 2 rounds alternating.
R=/tmp/resc
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
vl="- S=down S=qkv S=gateup S=wo S=attn S=norm1 S=down,qkv K=norm1,S=qkv K=norm2,S=gateup K=norm2"
vq="- S=qkv S=attn S=wo S=norm1"
for round in 1 2; do
  for f in $L $Q; do
    [ "$f" = "$L" ] && vs=$vl || vs=$vq
    for v in $vs; do
      budget 400 "$v $(basename "$f")" || break 3
      sp=""; sk=""
      case $v in K=*,S=*) sk=${v#K=}; sk=${sk%%,S=*}; sp=${v##*S=} ;; S=*) sp=${v#S=} ;; K=*) sk=${v#K=} ;; esac
      log "spacer '$sp' skip '$sk' round $round $(basename "$f")"
      FT_DEBUG_SPACER=$sp FT_DEBUG_SKIP=$sk timeout 60 "$B/ft" bench -m "$f" --device cuda -p 0 -n 128 -r 2 \
        --ctx-size 4096 --bw-gbs 4562 2>>"$R/ft.err" | rows | sed "s/ | cuda (NVIDIA[^|]*//;s/\$/ $v/" | tee -a "$R/ft.md"
    done
  done
done
for f in $L; do
  for sp in "" down,qkv,gateup; do
    FT_DEBUG_SPACER=$sp timeout 60 "$B/ft" generate --model "$f" --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 \
      --max-tokens 64 --temperature 0 --ignore-eos --json > "$R/gen_sp_${sp:-none}.json" 2>>"$R/ft.err"
  done
  cmp -s <(python3 -c "import json;print(json.load(open('$R/gen_sp_none.json'))['tokens'])") \
    <(python3 -c "import json;print(json.load(open('$R/gen_sp_down,qkv,gateup.json'))['tokens'])") &&
    log "spacers: same 64 tokens" || log "spacers: tokens DIFFER"
done
finish resc
