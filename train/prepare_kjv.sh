#!/usr/bin/env bash
# Prepares the training corpus of the default model: the King James Bible (public domain)
# from Debian's bible-kjv-text package, one chapter per document, one verse per line.
# Writes OUT/kjv_train.txt and OUT/kjv_valid.txt (every 40th chapter held out), with the
# chapters separated by blank lines.
#   train/prepare_kjv.sh /work/scratch/train-work
# The text ships in the bible-kjv program's own compressed format, so the program of the
# bible-kjv package (GPL-2+) dumps it; both packages are only unpacked, not installed.
set -euo pipefail
out="${1:?usage: prepare_kjv.sh OUT_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
cd "$out"
[ -f bible-kjv-text_*.deb ] || apt-get download bible-kjv-text
[ -f bible-kjv_*.deb ] || apt-get download bible-kjv
rm -rf pkg && mkdir pkg
dpkg -x bible-kjv-text_*.deb pkg
dpkg -x bible-kjv_*.deb pkg
# -f turns pretty-printing off: "Ge1:1 In the beginning God created ..." one verse a line.
./pkg/usr/bin/bible -f -p "$PWD/pkg/usr/lib" Gen1:1-Rev22:21 > kjv_raw.txt
python3 "$here/kjv_clean.py" kjv_raw.txt kjv_train.txt kjv_valid.txt
