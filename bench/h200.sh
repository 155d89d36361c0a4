#!/usr/bin/env bash
# The H200 end-to-end benchmark, one call on the GPU machine (16 cores, no internet, under
# 9 minutes): ft beside llama.cpp's CUDA build on the same two realistic-size NVFP4 files.
#
#   bench/h200.sh            (results under $OUT, at most 8 files; see benches/h200.md)
#
# Needs, carried from the dev machine: .devcarry/bin/{ft,ft-bigmodel} (+ libfmt.so.9 and
# any other shared library they need) and .devcarry/llama-src.tar.xz (scripts/pack-llama-src.sh).
# On the machine: cmake, ninja (or make), nvcc (/usr/local/cuda/bin), a GPU.
#
# Timeline (both halves overlap):
#   background: unpack the llama.cpp source, configure (CUDA, arch 90) and build only
#               llama-bench with -j12 under nice 19 (about 4 minutes);
#   foreground: ft-bigmodel writes the Llama-3.1-8B- and Qwen3-30B-A3B-shaped NVFP4 files to
#               /tmp (all cores), then `ft bench` runs on each (its CPU thread keeps priority
#               over the niced build);
#   then:       llama-bench -p 512 -n 128 -ngl 99 -fa 1 on each file, decode at depth too
#               when time is left; summary.md puts both side by side with bytes read per
#               token (ft-bigmodel's count: all weights, one token_embd row, 8/128 of the
#               experts; no KV cache) and % of the HBM roofline.
# Every step has a deadline so the whole call ends before DEADLINE_S (default 530 s).
#
# Knobs (environment): FT_BIN (default .devcarry/bin, else build/), LLAMA_SRC_TAR,
# LLAMA_BENCH (a llama-bench binary to use instead of building one),
# MODEL_DIR (/tmp/ft-bench-models), LAYERS (quick runs: --layers for ft-bigmodel),
# DEPTHS (decode depths besides 0, default "4096,16384"; empty = none), HBM_GBS (measured
# read bandwidth for the roofline, default 4400), LLAMA_JOBS (12), DEADLINE_S (530).
set -uo pipefail
T0=$(date +%s)
root="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$root/out/h200-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
FT_BIN="${FT_BIN:-}"
if [ -z "$FT_BIN" ]; then
  if [ -x "$root/.devcarry/bin/ft" ]; then FT_BIN="$root/.devcarry/bin"; else FT_BIN="$root/build"; fi
fi
LLAMA_SRC_TAR="${LLAMA_SRC_TAR:-$root/.devcarry/llama-src.tar.xz}"
MODEL_DIR="${MODEL_DIR:-/tmp/ft-bench-models}"
LAYERS="${LAYERS:-}"
DEPTHS="${DEPTHS-4096,16384}"
HBM_GBS="${HBM_GBS:-4400}"
LLAMA_JOBS="${LLAMA_JOBS:-12}"
DEADLINE_S="${DEADLINE_S:-530}"
WORK=/tmp/ft-h200
LLAMA_DIR="$WORK/llama.cpp"
LOG="$OUT/h200.log"
export LD_LIBRARY_PATH="$FT_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
mkdir -p "$WORK" "$MODEL_DIR"

log() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - T0))s] $*" | tee -a "$LOG" >&2; }
left() { echo $((DEADLINE_S - ($(date +%s) - T0))); }
# run_until SECONDS_TO_KEEP_IN_RESERVE CMD...: runs CMD with a timeout that leaves the reserve.
run_until() {
  local reserve=$1
  shift
  local t=$(($(left) - reserve))
  if [ "$t" -lt 5 ]; then
    log "skipped (no time left): $*"
    return 124
  fi
  timeout --kill-after=5 "$t" "$@"
}

log "h200.sh at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), OUT=$OUT, FT_BIN=$FT_BIN"
log "host: $(nproc) cores, $(free -g 2>/dev/null | awk '/Mem:/ {print $2 " GiB RAM"}'), /tmp free $(df -BG --output=avail /tmp | tail -1 | tr -d ' ')"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | while read -r l; do log "gpu: $l"; done
for b in ft ft-bigmodel; do
  [ -x "$FT_BIN/$b" ] || { log "missing $FT_BIN/$b (build it and carry it in .devcarry/bin)"; exit 1; }
done

# ---- background: llama-bench (CUDA) ---------------------------------------------------------
# Reused when the machine still holds a build of the same tarball.
build_llama() {
  set -e
  local stamp
  stamp="$(sha256sum "$LLAMA_SRC_TAR" | cut -c1-16)"
  if [ "$(cat "$LLAMA_DIR/.ft-stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$LLAMA_DIR"
    mkdir -p "$WORK"
    tar -C "$WORK" -xJf "$LLAMA_SRC_TAR"
    echo "$stamp" >"$LLAMA_DIR/.ft-stamp"
  fi
  local gen=(-G Ninja) tool=(ninja -C "$LLAMA_DIR/build" -j "$LLAMA_JOBS" llama-bench)
  if ! command -v ninja >/dev/null; then
    gen=(-G "Unix Makefiles")
    tool=(make -C "$LLAMA_DIR/build" -j "$LLAMA_JOBS" llama-bench)
  fi
  cmake -S "$LLAMA_DIR" -B "$LLAMA_DIR/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
  nice -n 19 "${tool[@]}"
  echo "llama-bench built in ${SECONDS}s (unpack + configure + build)"
}
build_pid=""
if [ -n "${LLAMA_BENCH:-}" ]; then
  log "using the given llama-bench $LLAMA_BENCH (no build)"
elif [ -f "$LLAMA_SRC_TAR" ]; then
  LLAMA_BENCH="$LLAMA_DIR/build/bin/llama-bench"
  export -f build_llama
  export LLAMA_SRC_TAR LLAMA_DIR WORK LLAMA_JOBS
  # Own session, so that a deadline kill takes nvcc and ninja with it (and nothing else).
  if command -v setsid >/dev/null; then
    setsid bash -c build_llama >"$WORK/llama-build.log" 2>&1 &
  else
    bash -c build_llama >"$WORK/llama-build.log" 2>&1 &
  fi
  build_pid=$!
  log "llama-bench build started in the background (pid $build_pid, -j$LLAMA_JOBS, log $WORK/llama-build.log)"
else
  LLAMA_BENCH=""
  log "no $LLAMA_SRC_TAR: llama.cpp is not built (run scripts/pack-llama-src.sh on the dev machine)"
fi

# ---- foreground: the two models -------------------------------------------------------------
declare -A MODEL
names=(llama8b-nvfp4 qwen3moe-30b-nvfp4)
: >"$OUT/models.txt"
for n in "${names[@]}"; do
  f="$MODEL_DIR/$n${LAYERS:+-$LAYERS}.gguf"
  MODEL[$n]="$f"
  args="--preset $n ${LAYERS:+--layers $LAYERS}"
  # A file from an earlier call on this machine is reused when tool and arguments match.
  if [ -f "$f" ] && [ -f "$f.info" ] && [ "$f.info" -nt "$FT_BIN/ft-bigmodel" ] && grep -qx "args: $args" "$f.info"; then
    log "reusing $f"
  else
    log "writing $f ($args)"
    rm -f "$f" "$f.info"
    if run_until 200 "$FT_BIN/ft-bigmodel" $args -o "$f" >"$f.out" 2>>"$LOG"; then
      { echo "args: $args"; cat "$f.out"; } >"$f.info"
    else
      log "ft-bigmodel failed for $n (exit $?)"
    fi
    rm -f "$f.out"
  fi
  [ -f "$f.info" ] && { echo "## $n"; cat "$f.info"; echo; } >>"$OUT/models.txt"
  log "$n: $(grep -h bytes_per_token "$f.info" 2>/dev/null)"
done

# ---- ft bench (while llama.cpp builds) ------------------------------------------------------
for n in "${names[@]}"; do
  f="${MODEL[$n]}"
  [ -f "$f" ] || continue
  o="$OUT/ft-bench-$n.md"
  log "ft bench $n"
  run_until 150 "$FT_BIN/ft" bench --model "$f" --device cuda -p 512 -n 128 --bw-gbs "$HBM_GBS" >"$o" 2>>"$LOG" ||
    log "ft bench $n failed (exit $?)"
  if [ -n "$DEPTHS" ] && [ "$(left)" -gt 240 ]; then
    log "ft bench $n at depths $DEPTHS"
    run_until 150 "$FT_BIN/ft" bench --model "$f" --device cuda -p 0 -n 128 -d "$DEPTHS" --bw-gbs "$HBM_GBS" \
      2>>"$LOG" | grep -v -e '^| model' -e '^|---' >>"$o" || log "ft bench $n depths failed"
  fi
  cat "$o" >>"$LOG"
done

# ---- llama-bench ----------------------------------------------------------------------------
if [ -n "$build_pid" ]; then
  log "waiting for the llama-bench build"
  while kill -0 "$build_pid" 2>/dev/null && [ "$(left)" -gt 60 ]; do sleep 2; done
  if kill -0 "$build_pid" 2>/dev/null; then
    log "llama-bench build not done by the deadline: stopping it"
    kill -- -"$build_pid" 2>/dev/null || kill "$build_pid" 2>/dev/null
  fi
  wait "$build_pid"
  rc=$?
  log "llama-bench build ended (exit $rc); last lines:"
  tail -5 "$WORK/llama-build.log" | tee -a "$LOG" >&2
  [ "$rc" -eq 0 ] || cp "$WORK/llama-build.log" "$OUT/llama-build.log"
fi
if [ -n "$LLAMA_BENCH" ] && [ -x "$LLAMA_BENCH" ]; then
  for n in "${names[@]}"; do
    f="${MODEL[$n]}"
    [ -f "$f" ] || continue
    o="$OUT/llama-bench-$n.md"
    log "llama-bench $n"
    run_until 20 "$LLAMA_BENCH" -m "$f" -p 512 -n 128 -ngl 99 -fa 1 -o md >"$o" 2>>"$LOG" ||
      log "llama-bench $n failed (exit $?)"
  done
  # Depth runs last: the headline numbers come first if time runs short.
  for n in "${names[@]}"; do
    f="${MODEL[$n]}"
    [ -f "$f" ] && [ -n "$DEPTHS" ] && [ "$(left)" -gt 90 ] || continue
    log "llama-bench $n at depths $DEPTHS"
    run_until 20 "$LLAMA_BENCH" -m "$f" -p 0 -n 128 -d "$DEPTHS" -r 3 -ngl 99 -fa 1 -o md 2>>"$LOG" |
      grep -v -e '^| *model' -e '^| *-' -e '^$' -e '^build' >>"$OUT/llama-bench-$n.md" || log "llama-bench $n depths failed"
  done
  for n in "${names[@]}"; do [ -f "$OUT/llama-bench-$n.md" ] && cat "$OUT/llama-bench-$n.md" >>"$LOG"; done
else
  log "no llama-bench binary: llama.cpp columns stay empty"
fi

# ---- summary ----------------------------------------------------------------------------------
# t/s of a test: the cell after the one that names the test (llama-bench: "tg128" or
# "tg128 @ d4096"; ft bench: "tg128" or "tg128@d4096").
tps() {
  [ -f "$1" ] || return 0
  awk -F'|' -v want="$2" '{
      for (i = 2; i < NF; i++) {
        c = $i; gsub(/^ +| +$/, "", c); gsub(/ /, "", c)
        if (c == want) { v = $(i + 1); sub(/±.*/, "", v); gsub(/ /, "", v); print v; exit }
      }
    }' "$1"
}
{
  echo "# H200: ft vs llama.cpp ($(date -u +%Y-%m-%d), ft $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo
  echo "HBM roofline at $HBM_GBS GB/s; GB/token = weights one decode step reads (ft-bigmodel), no KV cache."
  echo
  echo "| model | GB/token | test | llama.cpp t/s | ft t/s | ft / llama.cpp | llama.cpp % roofline | ft % roofline |"
  echo "|---|---|---|---|---|---|---|---|"
  for n in "${names[@]}"; do
    bpt=$(awk '/^bytes_per_token/ {print $2}' "${MODEL[$n]}.info" 2>/dev/null)
    tests="pp512 tg128"
    for d in ${DEPTHS//,/ }; do tests="$tests tg128@d$d"; done
    for t in $tests; do
      l=$(tps "$OUT/llama-bench-$n.md" "$t")
      f=$(tps "$OUT/ft-bench-$n.md" "$t")
      awk -v n="$n" -v t="$t" -v l="$l" -v f="$f" -v bpt="${bpt:-0}" -v bw="$HBM_GBS" 'BEGIN {
          gb = bpt / 1e9; dec = (t ~ /^tg/)
          r = (l > 0 && f > 0) ? sprintf("%.2fx", f / l) : ""
          rl = (dec && l > 0 && gb > 0) ? sprintf("%.1f%%", 100 * l * gb / bw) : ""
          rf = (dec && f > 0 && gb > 0) ? sprintf("%.1f%%", 100 * f * gb / bw) : ""
          printf "| %s | %.3f | %s | %s | %s | %s | %s | %s |\n", n, gb, t, l, f, r, rl, rf
        }'
    done
  done
} >"$OUT/summary.md"
cat "$OUT/summary.md" | tee -a "$LOG" >&2
log "done; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
