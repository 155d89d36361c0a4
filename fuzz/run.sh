#!/usr/bin/env bash
# Builds the GGUF fuzzer with clang (libFuzzer + ASan + UBSan) and runs it.
# Usage: fuzz/run.sh [seconds=600] [extra libFuzzer flags...]
# New inputs go to build-fuzz/corpus-work (not committed); crashes to build-fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
build=${FT_FUZZ_BUILD:-build-fuzz}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DFT_FUZZ=ON -DFT_TESTS=OFF
fi
ninja -C "$build" gguf_fuzz
mkdir -p "$build/corpus-work" "$build/crashes"
# One process: the build machine's cores are shared.
exec "$build/gguf_fuzz" "$build/corpus-work" fuzz/corpus \
  -dict=fuzz/gguf.dict -max_len=4096 -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build/crashes/" -print_final_stats=1 "$@"
