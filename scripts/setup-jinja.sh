#!/usr/bin/env bash
# Installs the chat-template oracle for tests/serve/jinja_hf_parity_test: the
# @huggingface/jinja npm package (the renderer transformers.js uses), into
# .deps/jinja/. Test-only; nothing of it is committed or linked.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.deps/jinja"
ver=0.5.11
if [ -f "$out/.done-$ver" ]; then exit 0; fi
command -v npm >/dev/null || { echo "setup-jinja: npm is required (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$out"
cd "$out"
[ -f package.json ] || echo '{"name":"ft-jinja-oracle","private":true}' > package.json
echo "setup-jinja: installing @huggingface/jinja@$ver ..."
npm install --no-audit --no-fund --ignore-scripts "@huggingface/jinja@$ver" >/dev/null
touch "$out/.done-$ver"
echo "setup-jinja: done ($out)"
