#!/usr/bin/env bash
# SASS of one CUDA source on the build machine, which has nvcc but no cuobjdump / nvdisasm (the CUDA 13 toolkit
# here ships neither). Debian's non-free nvidia-cuda-toolkit 11.8 has nvdisasm; it predates CUDA 12.8's cubin
# header (ELF ABI version 8, sm in e_flags bits 8..15), so the cubin's header is rewritten to the old form
# (ABI 7, flags 0x5a055a for sm_90) first. The instruction stream is the same ISA; only the header moved.
#   bench/sass_local.sh src/cuda/gemv_mma.cu [OUT.sass] [extra nvcc flags...]
# then: bench/sass_loop.py OUT.sass --kernel nvfp4_mma_kernel
# First use downloads the 84 MB .deb into ~/.cache/ft-nvdisasm (Debian's registry; nothing is installed).
set -euo pipefail
src=${1:?usage: bench/sass_local.sh FILE.cu [OUT.sass] [nvcc flags]}
out=${2:-/tmp/$(basename "$src" .cu).sass}
shift $(( $# >= 2 ? 2 : 1 ))
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${FT_NVDISASM_CACHE:-$HOME/.cache/ft-nvdisasm}
nvdisasm=$cache/usr/bin/nvdisasm
if [[ ! -x $nvdisasm ]]; then
  mkdir -p "$cache/lists/partial"
  cat > "$cache/nonfree.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  A=(-o "Dir::Etc::sourcelist=$cache/nonfree.sources" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$cache/lists"
     -o APT::Get::List-Cleanup=0)
  echo "sass_local: fetching nvidia-cuda-toolkit (nvdisasm) from Debian non-free into $cache" >&2
  apt-get "${A[@]}" update >/dev/null
  (cd "$cache" && apt-get "${A[@]}" download nvidia-cuda-toolkit >/dev/null 2>&1)
  dpkg -x "$cache"/nvidia-cuda-toolkit_*.deb "$cache"
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
"$nvcc" -DFMT_SHARED -DFT_HAVE_CUDA=1 -I"$root/src" -O3 -DNDEBUG -arch=sm_90 -lineinfo -std=c++17 -cubin "$@" \
  "$src" -o "$tmp/k.cubin"
python3 - "$tmp/k.cubin" <<'EOF'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
abi, flags = b[8], struct.unpack_from('<I', b, 0x30)[0]
if abi >= 8:  # CUDA >= 12.8's header: sm in bits 8..15
    sm = (flags >> 8) & 0xFF
    b[8] = 7
    struct.pack_into('<I', b, 0x30, (sm << 16) | 0x500 | sm)  # virtual sm, TEXMODE_UNIFIED | 64BIT_ADDRESS, sm
    open(p, 'wb').write(b)
EOF
"$nvdisasm" -c "$tmp/k.cubin" > "$out"
echo "sass_local: $(grep -c '^//-----' "$out") functions -> $out" >&2
