#!/usr/bin/env bash
# Installs the llama.cpp oracle used by the tests, from the npm registry only:
# node-llama-cpp@3.22.1 carries llama.cpp v0.5.0 as prebuilt CPU libraries and as a git
# bundle of its source. We take the libraries, the public headers and the tokenizer test
# vectors (models/ggml-vocab-*) into .deps/llama/. Nothing of it is committed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
deps="$root/.deps"
out="$deps/llama"
ver=3.22.1
if [ -f "$out/.done-$ver" ]; then exit 0; fi
command -v npm >/dev/null || { echo "setup-oracle: npm is required (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$deps/npm"
cd "$deps/npm"
[ -f package.json ] || echo '{"name":"ft-oracle-deps","private":true}' > package.json
echo "setup-oracle: installing node-llama-cpp@$ver (CPU libraries only) ..."
npm install --no-audit --no-fund --ignore-scripts --omit=optional \
  "node-llama-cpp@$ver" "@node-llama-cpp/linux-x64@$ver" >/dev/null
pkg="$deps/npm/node_modules/node-llama-cpp"
bins="$deps/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
rm -rf "$out" && mkdir -p "$out/lib" "$out/include" "$out/src"
cp -a "$bins"/*.so "$out/lib/"
echo "setup-oracle: unpacking the llama.cpp v0.5.0 source bundle ..."
git clone -q --no-checkout "$pkg/llama/gitRelease.bundle" "$out/src/llama.cpp"
git -C "$out/src/llama.cpp" -c advice.detachedHead=false checkout -q HEAD -- \
  include ggml/include models/templates \
  $(git -C "$out/src/llama.cpp" ls-tree --name-only HEAD models/ | grep -E 'ggml-vocab-(llama-bpe|qwen2|qwen35|gemma-4)\.gguf')
cp -a "$out/src/llama.cpp/include/." "$out/include/"
cp -a "$out/src/llama.cpp/ggml/include/." "$out/include/"
mkdir -p "$out/models" && cp -a "$out/src/llama.cpp/models/." "$out/models/"
touch "$out/.done-$ver"
echo "setup-oracle: done ($out)"
