#!/usr/bin/env bash
# gemma4 MoE on the H200: writes the Gemma-4-26B-A4B-shaped NVFP4 file (ft-bigmodel preset
# gemma4-26b-a4b-nvfp4: NVFP4 attention, dense MLP and split experts with per-expert scales,
# BF16 tied embeddings), then `ft bench` on it, fused and offload with half of the experts
# cached (tg128, pp512), and llama-bench -p 512 -n 128 -ngl 99 -fa 1 on the same file when
# LLAMA_BENCH names a binary (llama.cpp's CUDA build).
#   B=<folder with ft, ft-bigmodel> [M=/tmp/ft-models] [LLAMA_BENCH=...] bash bench/h200_gemma4.sh
# Roofline: ft-bigmodel's bytes_per_token (every weight a decode token reads: experts 8/128,
# one token_embd row, the tied BF16 head in full) at --bw-gbs 4562; the KV cache a token reads
# at these depths (< 1 MB) is left out.
set -uo pipefail
B=${B:-$PWD}
M=${M:-/tmp/ft-models}
OUT=${OUT:-/tmp/ft-out}
BW=4562
mkdir -p "$M" "$OUT"
F=$M/gemma4-26b-a4b.gguf
t0=$(date +%s)
log() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
if [ ! -s "$F.info" ] || [ ! -f "$F" ]; then
  log "writing $F"
  timeout "${GEN_TIMEOUT:-120}" "$B/ft-bigmodel" --preset gemma4-26b-a4b-nvfp4 -o "$F" -q > "$F.info" 2>&1 || log "ft-bigmodel failed ($?)"
fi
cat "$F.info"
BPT=$(awk '/^bytes_per_token/ {print $2}' "$F.info")
roof() {  # stdin: ft bench table rows; appends the roofline of the tg rows from bytes_per_token
  awk -v bpt="${BPT:-0}" -v bw="$BW" -F'|' '
    { print }
    $4 ~ /tg/ && bpt > 0 { tps = $5 + 0; printf("  -> %s: %.1f tok/s x %.3f GB/token = %.1f%% of %d GB/s\n",
      $4, tps, bpt / 1e9, 100 * tps * bpt / 1e9 / bw, bw) }'
}
log "ft bench fused"
timeout "${BENCH_TIMEOUT:-60}" "$B/ft" bench -m "$F" --device cuda -p 512 -n 128 -r "${REPS:-2}" --bw-gbs $BW \
  2> "$OUT/gemma4_fused.err" | roof
grep -hE "cuda memory|moe backend|rror" "$OUT/gemma4_fused.err" | head -4
log "ft bench offload 0.5"
timeout "${BENCH_TIMEOUT:-60}" "$B/ft" bench -m "$F" --device cuda --moe-backend offload --moe-cache-rate 0.5 \
  -p 512 -n 128 -r "${REPS:-2}" --bw-gbs $BW 2> "$OUT/gemma4_offload.err" | roof
grep -hE "cuda memory|moe backend|rror" "$OUT/gemma4_offload.err" | head -4
if [ -n "${LLAMA_BENCH:-}" ] && [ -x "$LLAMA_BENCH" ]; then
  log "llama-bench"
  timeout "${BENCH_TIMEOUT:-90}" "$LLAMA_BENCH" -m "$F" -p 512 -n 128 -ngl 99 -fa 1 2>&1 | grep -E "^\||error"
fi
log done
