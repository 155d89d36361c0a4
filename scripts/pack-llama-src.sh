#!/usr/bin/env bash
# Packs a pruned llama.cpp source tree that builds llama-bench and llama-server (CPU and CUDA
# backends only)
# into .devcarry/llama-src.tar.xz (< 5 MB), for GPU machines without internet
# (bench/h200.sh unpacks and builds it there).
#
#   scripts/pack-llama-src.sh [LLAMA_SRC] [OUT]
#
# LLAMA_SRC: a llama.cpp checkout (working tree), or a git repository whose HEAD is taken
# with `git archive` -- e.g. the no-checkout clone of node-llama-cpp's gitRelease.bundle
# that scripts/setup-oracle.sh leaves in .deps/llama/src/llama.cpp (the default).
#
# Kept: the top CMakeLists.txt, LICENSE, licenses/, cmake/, include/, src/, common/,
# vendor/, ggml/ minus the backends other than CPU and CUDA, tools/llama-bench, tools/server
# (+ mtmd, and ui's CMakeLists) and a tools/CMakeLists.txt that adds only those. Dropped: other tools, app/, examples/, tests/,
# docs/, models/, gguf-py/, ... so the build needs
#   cmake -B build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
#     -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
#   ninja -C build llama-bench
# (PRUNED.md inside the tarball says the same).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="${1:-$root/.deps/llama/src/llama.cpp}"
out="${2:-$root/.devcarry/llama-src.tar.xz}"
max_bytes=$((5 * 1024 * 1024))

[ -d "$src" ] || { echo "pack-llama-src: $src: no such directory (run scripts/setup-oracle.sh or pass a llama.cpp checkout)" >&2; exit 1; }
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
tree="$stage/llama.cpp"
mkdir -p "$tree"

keep=(CMakeLists.txt LICENSE licenses cmake include src common vendor ggml tools/llama-bench
      tools/server tools/mtmd tools/ui/CMakeLists.txt tools/ui/ui.h.in tools/ui/ui.cpp.in
      scripts/ui-assets.cmake)
if [ -f "$src/CMakeLists.txt" ] && [ -d "$src/ggml/src" ]; then
  for p in "${keep[@]}"; do
    [ -e "$src/$p" ] || { echo "pack-llama-src: $src/$p is missing" >&2; exit 1; }
    mkdir -p "$tree/$(dirname "$p")"
    cp -a "$src/$p" "$tree/$p"
  done
  rev="$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown) (working tree)"
elif git -C "$src" rev-parse -q --verify HEAD >/dev/null 2>&1; then
  git -C "$src" archive --format=tar HEAD -- "${keep[@]}" | tar -x -C "$tree"
  rev="$(git -C "$src" rev-parse --short HEAD) (git HEAD)"
else
  echo "pack-llama-src: $src is neither a llama.cpp working tree nor a git repository" >&2
  exit 1
fi

# ggml: only the CPU and CUDA backends (ggml_add_backend enters a backend's directory only
# when GGML_<NAME> is on, so the others can go).
for d in "$tree"/ggml/src/ggml-*/; do
  case "$(basename "$d")" in
    ggml-cpu | ggml-cuda) ;;
    *) rm -rf "$d" ;;
  esac
done
# build/ or .git left in a working tree must not travel; nor the server's tests and bench
# scripts (Python), nor mtmd's test data.
rm -rf "$tree/.git" "$tree"/build* "$tree/tools/server/tests" "$tree/tools/server/bench" \
  "$tree/tools/mtmd/tests" "$tree/tools/mtmd/test-"*

cat >"$tree/tools/CMakeLists.txt" <<'EOF'
# Pruned by FreeToken's scripts/pack-llama-src.sh: llama-bench, and llama-server when
# LLAMA_BUILD_SERVER is on (its web UI embeds no assets: -DLLAMA_USE_PREBUILT_UI=OFF).
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(llama-bench)
if (LLAMA_BUILD_SERVER)
    add_subdirectory(ui)
    add_subdirectory(mtmd)
    add_subdirectory(server)
endif()
EOF

cat >"$tree/PRUNED.md" <<EOF
Pruned llama.cpp source ($rev), made by FreeToken's scripts/pack-llama-src.sh.
Only llama-bench, llama-server and the CPU and CUDA backends build from it:

    cmake -B build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \\
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
    ninja -C build llama-bench
    # llama-server: -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF, ninja ... llama-server
EOF

mkdir -p "$(dirname "$out")"
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime='2020-01-01 00:00:00' \
  -cf - llama.cpp | xz -9e -T0 >"$out.tmp"
mv "$out.tmp" "$out"
size=$(stat -c %s "$out")
echo "pack-llama-src: $out: $size bytes from $src ($rev)"
if [ "$size" -gt "$max_bytes" ]; then
  echo "pack-llama-src: $out is larger than 5 MB ($size bytes)" >&2
  exit 1
fi
