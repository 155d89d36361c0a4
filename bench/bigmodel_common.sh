# Sourced by bench/h200_gemma4.sh and bench/h200_qwen35.sh: a big generated model on the H200
# and the `ft bench` / llama-bench runs on it.
#   bigmodel_file PRESET NAME  writes $M/NAME.gguf with `ft-bigmodel --preset PRESET` unless it
#                              and its .info exist; sets F and BPT (ft-bigmodel's bytes_per_token)
#   roof [STATE_BYTES]         filter of ft bench's table: each tg row also as tok/s x (BPT +
#                              state a token reads and writes) in % of BW GB/s
#   ft_bench LABEL ROOF_STATE ARGS...  ft bench on $F (cuda, -r $REPS, --bw-gbs $BW) through
#                              roof; stderr in $OUT/LABEL.err, its backend and error lines shown
#   llama_bench ARGS...        llama-bench -ngl 99 -fa 1 on $F when LLAMA_BENCH names a binary
# Environment: B (folder of ft, ft-bigmodel), M (models), OUT (logs), REPS, GEN_TIMEOUT,
# BENCH_TIMEOUT.
B=${B:-$PWD}
M=${M:-/tmp/ft-models}
OUT=${OUT:-/tmp/ft-out}
BW=4562
mkdir -p "$M" "$OUT"
t0=$(date +%s)
log() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }

bigmodel_file() {
  F=$M/$2.gguf
  if [ ! -s "$F.info" ] || [ ! -f "$F" ]; then
    log "writing $F"
    timeout "${GEN_TIMEOUT:-120}" "$B/ft-bigmodel" --preset "$1" -o "$F" -q > "$F.info" 2>&1 || log "ft-bigmodel failed ($?)"
  fi
  cat "$F.info"
  BPT=$(awk '/^bytes_per_token/ {print $2}' "$F.info")
}

roof() {
  awk -v bpt="${BPT:-0}" -v st="${1:-0}" -v bw="$BW" -F'|' '
    { print }
    $4 ~ /tg/ && bpt > 0 {
      tps = $5 + 0
      split_ = st > 0 ? sprintf(" (weights %.3f + state %.3f)", bpt / 1e9, st / 1e9) : ""
      printf("  -> %s: %.1f tok/s x %.3f GB/token%s = %.1f%% of %d GB/s\n",
             $4, tps, (bpt + st) / 1e9, split_, 100 * tps * (bpt + st) / 1e9 / bw, bw) }'
}

ft_bench() {
  local label=$1 state=$2
  shift 2
  timeout "${BENCH_TIMEOUT:-90}" "$B/ft" bench -m "$F" --device cuda -r "${REPS:-2}" --bw-gbs $BW "$@" \
    2> "$OUT/$label.err" | roof "$state"
  grep -hE "cuda memory|moe backend|rror" "$OUT/$label.err" | head -4
}

llama_bench() {
  if [ -n "${LLAMA_BENCH:-}" ] && [ -x "$LLAMA_BENCH" ]; then
    log "llama-bench"
    timeout "${BENCH_TIMEOUT:-90}" "$LLAMA_BENCH" -m "$F" "$@" -ngl 99 -fa 1 2>&1 | grep -E "^\||error"
  fi
}
