#!/usr/bin/env bash
# Installs the official API clients for tests/serve/server_clients_test: the `openai` and
# `@anthropic-ai/sdk` npm packages, into .deps/clients/. Test-only; nothing of them is
# committed or linked.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/.deps/clients"
openai_ver=5.23.2  # 6.x and later need Node 22; Debian 12 has Node 18-20
anthropic_ver=1.10.0
stamp="$out/.done-$openai_ver-$anthropic_ver"
if [ -f "$stamp" ]; then exit 0; fi
command -v npm >/dev/null || { echo "setup-clients: npm is required (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$out"
cd "$out"
[ -f package.json ] || echo '{"name":"ft-api-clients","private":true}' > package.json
echo "setup-clients: installing openai@$openai_ver @anthropic-ai/sdk@$anthropic_ver ..."
npm install --no-audit --no-fund --ignore-scripts "openai@$openai_ver" "@anthropic-ai/sdk@$anthropic_ver" >/dev/null
touch "$stamp"
echo "setup-clients: done ($out)"
