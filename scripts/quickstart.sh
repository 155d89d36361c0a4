#!/usr/bin/env bash
# Installs dependencies, builds `ft`, writes the default model and generates from it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target ft ft-testmodel
mkdir -p build/models
[ -f build/models/default.gguf ] || ./build/ft-testmodel --preset default --seed 1 --out build/models/default.gguf
# A random-weight model: it shows the engine at work, not language, so it ignores EOS.
./build/ft generate --model build/models/default.gguf --prompt "Once upon a time" --max-tokens 64 --ignore-eos "$@"
