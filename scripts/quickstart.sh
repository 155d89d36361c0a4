#!/usr/bin/env bash
# Installs dependencies, builds `ft` and generates from the committed default model,
# a small qwen3moe trained on the King James Bible (models/default.gguf; train/README.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target ft
./build/ft generate --model models/default.gguf --prompt "And God said" --max-tokens 64 "$@"
