#!/usr/bin/env bash
# Session 33, call 3: the fold's code in instances of its own (gemv_mma.cu FOLD, the lean kernel's NQ): the
# plain instances' PTX is main's but for the kernel parameter block (312 -> 368 bytes). Main before the fold
# (a6aa6c0, "base") against this build at FT_NORM_FOLD 0 / 2 / 3 (default), Llama-8B tg128 -p 0 --ctx-size 4096,
# 3 rounds alternating; Qwen3-30B-A3B (no dense layer: no fold) base against this build, 2 rounds.
R=/tmp/resc
source bench/device_common.sh
xz -dc .devcarry/pack/ft-base.xz > "$B/ft-base" && chmod +x "$B/ft-base"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
for e in FT_NORM_FOLD=0 FT_NORM_FOLD=2; do tokens_under "$e" "$L"; done
bench_one() {  # CONFIG FILE
  local c=$1 f=$2 bin=$B/ft e=$1
  [ "$c" = base ] && bin=$B/ft-base && e=""
  [ "$c" = "-" ] && e=""
  log "$c $(basename "$f")"
  env $e timeout 90 "$bin" bench -m "$f" --device cuda -p 0 -n 128 -r 2 --ctx-size 4096 --bw-gbs 4562 2>>"$R/ft.err" |
    rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a "$R/ft.md"
}
for round in 1 2 3; do for c in base FT_NORM_FOLD=0 FT_NORM_FOLD=2 -; do budget 400 "$c" && bench_one "$c" "$L"; done; done
for round in 1 2; do for c in base -; do budget 470 "$c" && bench_one "$c" "$Q"; done; done
finish resc
