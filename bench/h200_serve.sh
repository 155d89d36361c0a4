#!/usr/bin/env bash
# Serving throughput on the H200: ft serve (continuous batching on the GPU) and, when
# LLAMA_SERVER points to a llama-server binary, llama.cpp's server on the same file, each
# driven by `ft bench-serve` (streamed /completion requests, random token-id prompts,
# ignore_eos) at 1, 8, 32 and 64 concurrent clients. Prints one table: aggregate output
# tok/s, TTFT and inter-token latency p50/p99 per engine and concurrency.
#
#   FT=build/ft BIGMODEL=build/ft-bigmodel bash bench/h200_serve.sh
#   LLAMA_SERVER=/path/llama-server bash bench/h200_serve.sh   (both engines)
#
# Environment (defaults): MODEL (/tmp/ft-models/llama8b.gguf, written with ft-bigmodel
# --preset llama8b-nvfp4 when missing), CLIENTS ("1 8 32 64"), PROMPT (128), OUTPUT (128),
# ROUNDS (2: requests per client), CTX (512: per sequence), MAX_RUNNING (64), OUT (/tmp/ft-serve),
# DEVICE (cuda; cpu to try the script on a small model).
set -uo pipefail
FT=${FT:-build/ft}
BIGMODEL=${BIGMODEL:-build/ft-bigmodel}
MODEL=${MODEL:-/tmp/ft-models/llama8b.gguf}
CLIENTS=${CLIENTS:-"1 8 32 64"}
PROMPT=${PROMPT:-128}
OUTPUT=${OUTPUT:-128}
ROUNDS=${ROUNDS:-2}
CTX=${CTX:-512}
MAX_RUNNING=${MAX_RUNNING:-64}
OUT=${OUT:-/tmp/ft-serve}
PORT=${PORT:-18931}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT" "$(dirname "$MODEL")"
log() { echo "[$(date -u +%T)] $*" | tee -a "$OUT/serve_log.txt" >&2; }

if [ ! -f "$MODEL" ]; then
  log "writing $MODEL (llama8b-nvfp4)"
  "$BIGMODEL" --preset llama8b-nvfp4 -o "$MODEL" -q >>"$OUT/serve_log.txt" 2>&1 || { log "ft-bigmodel failed"; exit 1; }
fi

# 0 once GET /health answers 200 (bash's /dev/tcp: no curl needed). In a subshell, so the
# exec's descriptors and its silenced stderr stay there.
healthy() {
  (
    exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
    printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    IFS= read -r -t 5 line <&3
    [[ "$line" == *" 200"* ]]
  ) 2>/dev/null
}

wait_ready() {  # pid, seconds
  local i
  for ((i = 0; i < $2 * 2; ++i)); do
    healthy && return 0
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

# engine name, then the server command line.
run_engine() {
  local name=$1
  shift
  log "$name: $*"
  "$@" >"$OUT/server_$name.txt" 2>&1 &
  local pid=$!
  if ! wait_ready $pid 300; then
    log "$name did not become ready"; tail -20 "$OUT/server_$name.txt" >&2
    kill $pid 2>/dev/null; wait $pid 2>/dev/null; return 1
  fi
  # Warm-up (graph capture, first-touch allocations) outside the figures.
  "$FT" bench-serve --port "$PORT" -c 4 -n 4 -p "$PROMPT" -m 8 >/dev/null 2>&1
  for c in $CLIENTS; do
    log "$name: $c clients"
    timeout 300 "$FT" bench-serve --port "$PORT" -c "$c" -n $((c * ROUNDS)) -p "$PROMPT" -m "$OUTPUT" --json \
      >"$OUT/bench_${name}_$c.json" 2>>"$OUT/serve_log.txt" || log "$name: bench-serve at $c clients failed ($?)"
  done
  kill $pid 2>/dev/null
  wait $pid 2>/dev/null
  grep -h "continuous batching\|cuda batch\|cuda memory" "$OUT/server_$name.txt" | head -5 >>"$OUT/serve_log.txt"
}

ENGINES=ft
run_engine ft "$FT" serve --model "$MODEL" --device "$DEVICE" --port "$PORT" --ctx-size "$CTX" \
  --max-running-requests "$MAX_RUNNING" --max-queue 256
if [ -n "${LLAMA_SERVER:-}" ]; then
  ENGINES="ft llama"
  max_c=0
  for c in $CLIENTS; do ((c > max_c)) && max_c=$c; done
  run_engine llama "$LLAMA_SERVER" -m "$MODEL" --port "$PORT" -ngl 99 -fa on -np "$max_c" -c $((max_c * CTX)) \
    --cont-batching
fi

# The table (one row per engine and concurrency).
printf '\n%-6s %7s %10s %10s %10s %10s %10s %7s\n' engine clients "out tok/s" "TTFT p50" "TTFT p99" "ITL p50" \
  "ITL p99" "ok/all" | tee "$OUT/serve_table.txt"
for e in $ENGINES; do
  for c in $CLIENTS; do
    f="$OUT/bench_${e}_$c.json"
    if [ ! -s "$f" ]; then
      printf '%-6s %7s %10s\n' "$e" "$c" "(failed)" | tee -a "$OUT/serve_table.txt"
      continue
    fi
    python3 - "$e" "$c" "$f" <<'PY' | tee -a "$OUT/serve_table.txt"
import json, sys
e, c, f = sys.argv[1:4]
j = json.load(open(f))
n = j["ok"] + j["rejected"] + j["failed"]
print(f'{e:<6} {c:>7} {j["output_tok_s"]:>10.1f} {j["ttft"]["p50_ms"]:>8.1f}ms {j["ttft"]["p99_ms"]:>8.1f}ms '
      f'{j["itl"]["p50_ms"]:>8.2f}ms {j["itl"]["p99_ms"]:>8.2f}ms {j["ok"]:>3}/{n}')
PY
  done
done
echo "(prompt $PROMPT, output $OUTPUT tokens, $ROUNDS requests per client; model $(basename "$MODEL"))" | tee -a "$OUT/serve_table.txt"
