#!/usr/bin/env bash
# Rebuilds models/default.gguf (train/README.md has the recipe and the results).
#
#   train/make_default.sh prepare WORK        corpus, tokenizer and token ids into WORK/data
#   (GPU)  python3 train/train_default.py --data WORK/data --out RUN   (about 2.5 minutes on an H200)
#   train/make_default.sh export WORK RUN     NVFP4 + BF16 HF checkpoints, then models/default.gguf
#
# Needs Debian's python3-regex (prepare) and python3-torch python3-numpy (export), and a
# built `ft` (build/ft, or FT=path).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
py=/usr/bin/python3
cmd="${1:?usage: make_default.sh prepare WORK | export WORK RUN}"
work="${2:?usage: make_default.sh prepare WORK | export WORK RUN}"
case "$cmd" in
  prepare)
    "$here/prepare_kjv.sh" "$work"
    mkdir -p "$work/data"
    "$py" "$here/bpe.py" train "$work/kjv_train.txt" --vocab 4096 --max-length 512 --out "$work/data"
    for s in train valid; do
      "$py" "$here/bpe.py" encode "$work/kjv_$s.txt" --tok "$work/data" --out "$work/data/kjv_$s.ids"
    done
    cp "$work/kjv_valid.txt" "$work/data/"
    echo "next, on a GPU: python3 train/train_default.py --data $work/data --out RUN"
    ;;
  export)
    run="${3:?usage: make_default.sh export WORK RUN}"
    "$py" "$here/export_nvfp4.py" "$run" "$work/data" "$work/default-hf" --bf16-out "$work/default-hf-bf16"
    "${FT:-$root/build/ft}" convert "$work/default-hf" --out "$root/models/default.gguf"
    "${FT:-$root/build/ft}" generate --model "$root/models/default.gguf" --prompt "And God said" \
      --temperature 0 --max-tokens 40
    ;;
  *)
    echo "usage: make_default.sh prepare WORK | export WORK RUN" >&2
    exit 2
    ;;
esac
