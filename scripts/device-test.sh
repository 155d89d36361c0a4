#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, over binaries packed by
# scripts/pack-device.sh: the gpu-labelled tests, then the parity suite with our side on the
# GPU (FT_PARITY_DEVICE=cuda). Logs go to $OUT (the device tool brings them back).
#   bash scripts/device-test.sh [GTEST_FILTER]
set -uo pipefail
ROOT=$PWD
B=$ROOT/.devcarry/bin
[ -x "$B/ft" ] || tar xJf "$ROOT/.devcarry/pack/bin.tar.xz" -C "$ROOT/.devcarry"
OUT=${OUT:-/tmp/ft-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FT_LLAMA_LIB_DIR=$B FT_BIN_DIR=$B FT_PARITY_MODELS=/tmp/ft-parity
nvidia-smi -L
cd "$B"
echo "== test_cuda $(date +%T)"
./test_cuda --gtest_brief=1 --gtest_filter="${1:-*}" >"$OUT/test_cuda.txt" 2>&1
echo "test_cuda rc=$?"
grep -E "GPU-VS-CPU|QWEN35-" "$OUT/test_cuda.txt"
grep -E "^\[  (FAILED|PASSED) " "$OUT/test_cuda.txt" | sed 's/, where GetParam.*//' | sort -u | tail -60
if [ -z "${1:-}" ] || [ "${PARITY:-1}" = 1 ]; then
  echo "== parity on cuda $(date +%T)"
  # The architectures the CUDA backend runs (gpu::gpu_supports); the others are CPU-only yet.
  FT_PARITY_DEVICE=cuda ./test_parity \
    --gtest_filter='Models/Parity.*/llama_*:Models/Parity.*/qwen3_*:Models/Parity.*/qwen3moe_*:Models/Parity.*/gemma4_*:Models/Parity.*/qwen35_*:Models/Parity.*/qwen35moe_*' \
    >"$OUT/parity_cuda.txt" 2>&1
  echo "parity rc=$?"
  grep -E "^PARITY|FAILED" "$OUT/parity_cuda.txt" | sed 's/, where GetParam.*//'
fi
echo "== done $(date +%T)"
