#!/usr/bin/env bash
# Runs the whole-model parity suite (test_parity, Models/*) and prints one line per
# configuration, grouped by architecture, for release notes / issue comments:
#   PARITY arch=qwen3moe cfg=nvfp4-experts-attn exact: max|dlogit|=3.8e-06 tf 32/32 free 32/32 | quantized-file: ...
# Usage: scripts/parity-report.sh [BUILD_DIR]   (default: build)
# Exit status: that of test_parity (non-zero when a configuration fails).
set -uo pipefail
build="${1:-build}"
bin="$build/tests/test_parity"
[ -x "$bin" ] || bin="$build/test_parity"
if [ ! -x "$bin" ]; then
  echo "parity-report: $build/tests/test_parity not found; build it with: ninja -C $build test_parity" >&2
  exit 2
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
"$bin" --gtest_filter='Models/Parity.*' >"$log" 2>&1
rc=$?
for arch in llama qwen3 qwen3moe; do
  echo "== $arch"
  grep -E "^PARITY (device=[a-z]+ )?arch=$arch " "$log" | sed 's/^PARITY //'
done
echo "== failures"
if grep -qE '^\[  FAILED  \] Models/' "$log"; then
  grep -E '^\[  FAILED  \] Models/' "$log" | sed 's/, where GetParam.*//' | sort -u
  grep -E 'Failure|step [0-9]+:|diverge|differ' "$log" | head -40
else
  echo "(none)"
fi
exit $rc
