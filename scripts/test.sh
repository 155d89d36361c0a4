#!/usr/bin/env bash
# Builds (Release, build/) and runs the test suite, parity against llama.cpp included.
# GPU tests (ctest label gpu) are excluded here; run them with `ctest --preset gpu` on a GPU machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
./scripts/setup-oracle.sh
./scripts/setup-jinja.sh  # @huggingface/jinja, the reference of tests/serve/jinja_hf_parity_test
./scripts/setup-clients.sh  # openai + @anthropic-ai/sdk npm clients for tests/serve/server_clients_test
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
ctest --preset release -j "$(nproc)" "$@"
