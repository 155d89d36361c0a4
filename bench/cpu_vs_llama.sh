#!/usr/bin/env bash
# CPU speed beside llama.cpp: prefill of a 64-token prompt and greedy decode of 128 tokens
# on a small qwen3moe NVFP4 model and a llama NVFP4 model, same thread count, same run.
# Usage: bench/cpu_vs_llama.sh [BUILD_DIR] [THREADS] [REPS]   -> prints a table; with
# BENCH_OUT=FILE also appends it there (benches/cpu.md keeps the reference runs).
# FT_DTYPE=float32 times ft's exact-fp32 route instead of the default (auto: llama.cpp's
# numerics, Q8-rounded activations and integer kernels).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
threads="${2:-$(nproc)}"
reps="${3:-3}"
models="$build/bench-models"
mkdir -p "$models"
for t in ft ft-testmodel llama-bench-cpu; do
  [ -x "$build/$t" ] || { echo "missing $build/$t: build it first (scripts/test.sh)" >&2; exit 1; }
done

# Shapes: small enough to generate in seconds here, large enough that weights leave the caches.
qwen="$models/qwen3moe-nvfp4.gguf"
llama="$models/llama-nvfp4.gguf"
[ -f "$qwen" ] || "$build/ft-testmodel" --arch qwen3moe --nvfp4 attn,experts,output --seed 7 \
  --n-vocab 8192 --n-embd 1024 --n-layer 8 --n-head 16 --n-head-kv 4 --head-dim 64 \
  --n-expert 16 --n-expert-used 4 --n-ff-exp 512 --ctx 4096 -o "$qwen" >/dev/null
[ -f "$llama" ] || "$build/ft-testmodel" --arch llama --nvfp4 attn,mlp,output --seed 7 \
  --n-vocab 8192 --n-embd 1024 --n-layer 8 --n-head 16 --n-head-kv 4 --n-ff 2816 --ctx 4096 \
  -o "$llama" >/dev/null

prompt=$(seq -s, 1 64)
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])" ; }
best() { sort -g | tail -1; }

table="| model | threads | ft prefill tok/s | llama.cpp prefill tok/s | ratio | ft decode tok/s | llama.cpp decode tok/s | ratio |
|---|---|---|---|---|---|---|---|"
for m in "$qwen" "$llama"; do
  ftp=(); ftd=(); lp=(); ld=()
  for ((r = 0; r < reps; r++)); do
    j=$("$build/ft" generate --model "$m" --prompt-tokens "$prompt" --max-tokens 128 --temperature 0 \
          --ignore-eos --threads "$threads" --dtype "${FT_DTYPE:-auto}" --json 2>/dev/null)
    ftp+=("$(echo "$j" | python3 -c "import json,sys; print(json.load(sys.stdin)['timings']['prefill_tok_s'])")")
    ftd+=("$(echo "$j" | python3 -c "import json,sys; print(json.load(sys.stdin)['timings']['decode_tok_s'])")")
    j=$("$build/llama-bench-cpu" --model "$m" --threads "$threads" --prompt-len 64 --gen 128 2>/dev/null)
    lp+=("$(echo "$j" | field prefill_tok_s)")
    ld+=("$(echo "$j" | field decode_tok_s)")
  done
  a=$(printf '%s\n' "${ftp[@]}" | best); b=$(printf '%s\n' "${lp[@]}" | best)
  c=$(printf '%s\n' "${ftd[@]}" | best); d=$(printf '%s\n' "${ld[@]}" | best)
  row=$(python3 -c "print(f'| $(basename "$m") | $threads | {$a:.1f} | {$b:.1f} | {$a/$b:.2f}x | {$c:.1f} | {$d:.1f} | {$c/$d:.2f}x |')")
  table+=$'\n'"$row"
done
echo "$table"
if [ -n "${BENCH_OUT:-}" ]; then
  { echo; echo "### $(date -u +%Y-%m-%d) $(git -C "$root" rev-parse --short HEAD), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), best of $reps, ft --dtype ${FT_DTYPE:-auto}"; echo; echo "$table"; } >> "$BENCH_OUT"
fi
