#!/usr/bin/env bash
# Packs what a run on the GPU machine needs into .devcarry/bin (git-ignored): our binaries
# built here (the device image has no fmt or GoogleTest, so the project cannot configure
# there), libfmt, and llama.cpp's CPU libraries for the parity oracle. Stripped, so the
# carried tree stays under the device tool's 64 MiB.
#   scripts/pack-device.sh [BUILD_DIR]      (default build-cuda, `cmake --preset cuda`)
#   PACK_ONLY="ft test_cuda" scripts/pack-device.sh   only those binaries, no llama.cpp libraries
#   (the carry limit is 64 MiB with the tracked tree, ~20 MiB of it the embedded model)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-cuda}
OUT=.devcarry/bin
rm -rf "$OUT" && mkdir -p "$OUT"
# Every binary packed must be a target of this build: a leftover of an earlier
# configuration (test_parity drops out of the build when a reconfigure cannot find
# .deps/llama) would run stale tests on the device. Refuse instead.
for f in ft tests/test_cuda tests/test_parity tests/test_moe_cpu llama-oracle ft-bigmodel; do
  [ -f "$B/$f" ] || continue
  if ! ninja -C "$B" -t query "$f" >/dev/null 2>&1; then
    echo "pack-device: $B/$f is not a target of this build (a stale leftover); reconfigure or delete it" >&2
    exit 1
  fi
done
for f in ft tests/test_cuda tests/test_parity tests/test_moe_cpu llama-oracle ft-bigmodel ft-bench-gemv-cuda \
         ft-bench-gemm-cuda ft-bench-attention-cuda ft-bench-deltanet-cuda ft-bench-moe-cpu ft-bench-chain-cuda \
         ft-bench-tlb-cuda ft-bench-batch; do
  if [ -n "${PACK_ONLY:-}" ] && ! [[ " $PACK_ONLY " == *" $(basename "$f") "* ]]; then continue; fi
  [ -f "$B/$f" ] && cp "$B/$f" "$OUT/" || echo "pack-device: no $B/$f (skipped)"
done
# PACK_EXTRA="FILE.." : more binaries packed beside them under their own names (another build's ft for an
# A/B in one call, e.g. PACK_EXTRA=/tmp/ft_base; bench/device_common.sh's FTBIN=ft_base runs it).
for f in ${PACK_EXTRA:-}; do cp "$f" "$OUT/"; done
# Debian libraries the binaries link that the device image lacks (its CUDA image has glibc and
# libstdc++ only): whatever ldd resolves under /lib/x86_64-linux-gnu except those.
# (Every packed binary: ft-bench-attention-cuda alone links libutf8proc, which test_cuda does not.)
for f in "$OUT"/*; do
  if [ -f "$f" ] && [ -x "$f" ]; then ldd "$f" | awk '$3 ~ /^(\/usr)?\/lib\/x86_64-linux-gnu\// {print $3}'; fi
done | sort -u | { grep -vE '/lib(c|m|gcc_s|stdc\+\+|pthread|dl|rt)\.so' || true; } |
  while read -r lib; do cp -L "$lib" "$OUT/"; done
L=.deps/llama/lib
[ -n "${PACK_ONLY:-}" ] && L=/nonexistent
for f in libggml-base.so libggml.v0.5.0.so libllama.v0.5.0.so libggml-cpu-x64.so \
         libggml-cpu-haswell.so libggml-cpu-skylakex.so libggml-cpu-icelake.so \
         libggml-cpu-sapphirerapids.so libggml-cpu-zen4.so; do
  if [ -f "$L/$f" ]; then cp -L "$L/$f" "$OUT/"; fi
done
strip --strip-unneeded "$OUT"/* 2>/dev/null || true
du -sh "$OUT"
# The carried folder: one xz archive (CUDA fatbins compress well), unpacked on the device
# with `tar xJf .devcarry/pack/bin.tar.xz -C .devcarry`. xz -9, not -3 or -6: the carry limit is 64 MiB
# with the tracked tree (~20 MB), and the pack grew past it at -3 (session 22) and, with llama.cpp's
# source beside it, at -6 (session 34: ft + test_cuda + ft-bigmodel 44.2 MB at -6, 42.8 MB at -9, ~90 s).
# One thread and a 256 MiB dictionary: binaries that share most of their bytes (an A/B's two ft builds)
# then compress as one -- session 44: ft x2 + ft-bench-gemv-cuda x2 + ft-bigmodel 48 MB at -T2 -9, 24 MB so
# (~150 s on 2 cores).
mkdir -p .devcarry/pack
tar cf - -C .devcarry bin | xz -T1 --lzma2=preset=9,dict=256MiB > .devcarry/pack/bin.tar.xz
[ -f .devcarry/llama-src.tar.xz ] && cp .devcarry/llama-src.tar.xz .devcarry/pack/
du -sh .devcarry/pack
