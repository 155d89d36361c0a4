#!/usr/bin/env bash
# qwen35moe on the H200: writes the Qwen3.6-35B-A3B-shaped NVFP4 file (ft-bigmodel preset
# qwen36-35b-a3b-nvfp4: experts, shared experts and output NVFP4, attention and Gated DeltaNet
# projections BF16), then `ft bench` on it, fused and offload with a quarter of the experts
# cached (tg128, pp2048, pp8192), and llama-bench on the same file when LLAMA_BENCH names a
# binary (llama.cpp's CUDA build).
#   B=<folder with ft, ft-bigmodel> [M=/tmp/ft-models] [LLAMA_BENCH=...] bash bench/h200_qwen35.sh
# Roofline: ft bench's GB/token counts the projections it knows (not the Gated DeltaNet and
# shared-expert ones), so the % printed here uses ft-bigmodel's bytes_per_token (every weight a
# decode token reads, experts n_used / n_expert) plus the recurrent state each token reads and
# writes (30 Gated DeltaNet layers x 32 heads x 128 x 128 fp32, twice), at --bw-gbs 4562.
set -uo pipefail
B=${B:-$PWD}
M=${M:-/tmp/ft-models}
OUT=${OUT:-/tmp/ft-out}
BW=4562
mkdir -p "$M" "$OUT"
F=$M/qwen36-35b-a3b.gguf
t0=$(date +%s)
log() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
if [ ! -s "$F.info" ] || [ ! -f "$F" ]; then
  log "writing $F"
  timeout "${GEN_TIMEOUT:-120}" "$B/ft-bigmodel" --preset qwen36-35b-a3b-nvfp4 -o "$F" -q > "$F.info" 2>&1 || log "ft-bigmodel failed ($?)"
fi
cat "$F.info"
BPT=$(awk '/^bytes_per_token/ {print $2}' "$F.info")
STATE=$((30 * 32 * 128 * 128 * 4 * 2))
roof() {  # stdin: ft bench table rows; appends the roofline of the tg rows from bytes_per_token
  awk -v bpt="${BPT:-0}" -v st="$STATE" -v bw="$BW" -F'|' '
    { print }
    $4 ~ /tg/ && bpt > 0 { tps = $5 + 0; printf("  -> %s: %.1f tok/s x %.3f GB/token (weights %.3f + state %.3f) = %.1f%% of %d GB/s\n",
      $4, tps, (bpt + st) / 1e9, bpt / 1e9, st / 1e9, 100 * tps * (bpt + st) / 1e9 / bw, bw) }'
}
log "ft bench fused"
timeout "${BENCH_TIMEOUT:-90}" "$B/ft" bench -m "$F" --device cuda -p 2048,8192 -n 128 -r "${REPS:-2}" --bw-gbs $BW \
  2> "$OUT/qwen35_fused.err" | roof
grep -hE "cuda memory|moe backend" "$OUT/qwen35_fused.err" | head -3
log "ft bench offload 0.25"
timeout "${BENCH_TIMEOUT:-90}" "$B/ft" bench -m "$F" --device cuda --moe-backend offload --moe-cache-rate 0.25 \
  -p 2048,8192 -n 128 -r "${REPS:-2}" --bw-gbs $BW 2> "$OUT/qwen35_offload.err" | roof
grep -hE "cuda memory|moe backend" "$OUT/qwen35_offload.err" | head -3
if [ -n "${LLAMA_BENCH:-}" ] && [ -x "$LLAMA_BENCH" ]; then
  log "llama-bench"
  timeout "${BENCH_TIMEOUT:-90}" "$LLAMA_BENCH" -m "$F" -p 2048,8192 -n 128 -ngl 99 -fa 1 2>&1 | grep -E "^\||error"
fi
log done
