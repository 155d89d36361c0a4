# Sourced by the device-call scripts (bench/session8/h200_*.sh and later): the preamble every
# call repeated until session 7. Sets OUT (comes back), R (this call's logs, tarred into
# $OUT by finish), B (our binaries, unpacked from .devcarry/pack/bin.tar.xz once), M (models in
# /dev/shm), T0, log(), and the library paths for the parity oracle.
#   R=/tmp/resX; source bench/device_common.sh; ...; finish resX
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=${R:-/tmp/res}
mkdir -p "$R" "$OUT"
ROOT=$PWD
T0=$(date +%s)
log() { echo "[$(date -u +%T) +$(($(date +%s) - T0))s] $*" | tee -a "$R/log.txt"; }
# Unpacked afresh each call: a warm machine keeps an earlier call's ignored folders.
rm -rf .devcarry/bin && tar xJf .devcarry/pack/bin.tar.xz -C .devcarry
B=$ROOT/.devcarry/bin
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64 PATH=/usr/local/cuda/bin:$PATH
export FT_LLAMA_LIB_DIR=$B FT_BIN_DIR=$B
M=/dev/shm/m
mkdir -p "$M"
# The issue-3 models' files (models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4 writes them).
L=$M/llama8b-nvfp4.gguf
Q=$M/qwen3moe-30b-nvfp4.gguf

# gpu_tests SECONDS [FILTER]: test_cuda (all tests, or the gtest filter) into $R/test.txt within
# SECONDS; prints its summary and failure lines.
gpu_tests() {
  (cd "$B" && timeout "$1" ./test_cuda --gtest_brief=1 ${2:+--gtest_filter=$2} > "$R/test.txt" 2>&1
   echo "rc=$?" >> "$R/test.txt")
  grep -E "tests? ran|PASSED|FAILED|rc=|Failure|exception|ATTN-MMA|NORM-CTA" "$R/test.txt" | tail -20
}

# h200_or_not: H200=1 on an H200 (llama.cpp's build started in the background: an H200 call also makes issue 3's
# table), else 0; logs the card. A call for nvidia-h200 runs on an H100 most times.
h200_or_not() {
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  H200=0
  [[ $gpu == *H200* ]] && H200=1
  log "GPU: $gpu (H200=$H200)"
  if [ $H200 = 1 ]; then llama_build_bg; fi
}

# gpu_tests_until SECONDS: test_cuda (all) into $R/test_all.txt until the call is SECONDS old (the time llama.cpp's
# build leaves); prints its summary.
gpu_tests_until() {
  (cd "$B" && timeout $(($1 - ($(date +%s) - T0))) ./test_cuda --gtest_brief=1 > "$R/test_all.txt" 2>&1
   echo "rc=$?" >> "$R/test_all.txt")
  grep -E "tests? ran|PASSED|FAILED|rc=" "$R/test_all.txt" | tail -5
}

# issue3_tail [ENV=V]: an H200 call's end after its own measurements -- test_cuda (all) until 400 s, llama.cpp's
# build awaited until 420 s, then issue 3's depth table, ft (under ENV=V when given) until 500 s, then llama-bench
# until 575 s.
issue3_tail() {
  log "test_cuda (all, until llama.cpp is built)"
  gpu_tests_until 400
  llama_wait 420
  if [ -n "${1:-}" ]; then export "$1"; fi
  ft_bench_each 500 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
  llama_depth_rows 420 575 $L $Q
}

# budget SECONDS WHAT: true while the call is younger than SECONDS, else logs that WHAT is skipped.
budget() { [ $(($(date +%s) - T0)) -lt "$1" ] || { log "skipped (time): $2"; return 1; }; }
# rows: the result rows of an `ft bench` or `llama-bench -o md` table (llama-bench right-aligns
# its test column: "|           pp512 |"; depths: ft "tg128@d4096", llama-bench "tg128 @ d4096").
rows() { grep -E '^\|.*\|\s+(pp|tg)[0-9]+(\s*@\s*d[0-9]+)?\s+\|' ; }

# model PRESET: writes $M/PRESET.gguf with ft-bigmodel unless it exists; prints bytes_per_token.
model() {
  [ -f "$M/$1.gguf" ] || timeout 120 "$B/ft-bigmodel" --preset "$1" -o "$M/$1.gguf" -q > "$M/$1.info" 2>&1
  grep bytes_per_token "$M/$1.info"
}

# models_bg PRESET..: writes the presets' files in the background (logs in $R/models.txt);
# models_wait waits for them and prints that log.
models_bg() {
  ( for p in "$@"; do model "$p"; done ) > "$R/models.txt" 2>&1 &
  MODELS_PID=$!
}
models_wait() { wait "$MODELS_PID"; cat "$R/models.txt"; }

# llama_build_bg: builds llama.cpp's CUDA llama-bench (pruned v0.5.0 tree, arch 90) in the
# background into $W; llama_wait SECONDS waits for it until T0 + SECONDS, then sets LB.
W=/tmp/ft-llama
llama_build_bg() {
  mkdir -p $W
  ( tar -C $W -xJf "$ROOT/.devcarry/pack/llama-src.tar.xz" && cd $W/llama.cpp &&
    cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
      -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF > $W/cfg.log 2>&1 &&
    nice -n 10 ninja -C build -j 14 llama-bench > $W/build.log 2>&1; echo rc=$? > $W/done ) &
}
llama_wait() {
  while [ ! -f $W/done ] && [ $(($(date +%s) - T0)) -lt "$1" ]; do sleep 2; done
  log "llama build: $(cat $W/done 2>/dev/null || echo 'not done') | $(tail -1 $W/build.log 2>/dev/null | head -c 200)"
  LB=$W/llama.cpp/build/bin/llama-bench
  export LD_LIBRARY_PATH=$W/llama.cpp/build/bin:$LD_LIBRARY_PATH
}

finish() { tar czf "$OUT/$1.tgz" -C "$(dirname "$R")" "$(basename "$R")"; log done; }

# The A/B helpers (ab_rounds, ab_envs, ab_values) load each binary's kernels eagerly (CUDA_MODULE_LOADING=EAGER;
# AB_LOADING=LAZY, or a setting naming CUDA_MODULE_LOADING, for the driver's default). Why: where lazily loaded code
# lands is fixed per binary and setting and moves Llama-8B decode by up to 2% with the same code (H100 session 45
# call 3: a probe whose clean and checked instances are the same code, 463.30 against 453.85 tok/s, every round
# within 0.4) -- a bias that rounds cannot average. Eagerly loaded, a run's rounds scatter (451-465 tok/s) and the
# same code's two settings meet (call 4, 10 rounds each: 459.38 / 460.52): more rounds, no fixed bias.
AB_LOADING=${AB_LOADING:-EAGER}

# ab_rounds VAR "V1 V2 .." ROUNDS MODEL_FILE [ft bench args]: ft bench's rows with VAR set to each
# value in turn, alternating, ROUNDS rounds (host variance between calls reaches ~2.5%: an A/B runs
# in one call). Rows go to $R/ft.md; stops at AB_BUDGET seconds into the call (default 500).
ab_rounds() {
  local var=$1 vals=$2 rounds=$3 f=$4 round v
  shift 4
  for round in $(seq "$rounds"); do
    for v in $vals; do
      budget "${AB_BUDGET:-500}" "$var=$v $(basename "$f")" || return 0
      log "$var=$v round $round $(basename "$f")"
      env "CUDA_MODULE_LOADING=$AB_LOADING" "$var=$v" timeout 90 "$B/ft" bench -m "$f" --device cuda "$@" 2>>"$R/ft.err" | rows |
        sed 's/ | cuda (NVIDIA[^|]*//' | tee -a "$R/ft.md"
    done
  done
}

# llama_bench_rows UNTIL FILE..: llama.cpp's llama-bench -p 512 -n 128 -ngl 99 -fa 1 -r 2 on each file
# (after llama_wait set LB) while the call is younger than UNTIL seconds; rows into
# $R/llama-bench.md, whole tables into $R/lb_raw.md.
llama_bench_rows() {
  local until=$1 f
  shift
  [ -x "${LB:-}" ] || { log "no llama-bench"; return 0; }
  for f in "$@"; do
    budget "$until" "llama-bench $f" || break
    timeout 60 "$LB" -m "$f" -p 512 -n 128 -ngl 99 -fa 1 -r 2 -o md 2>>"$R/lb.err" | tee -a "$R/lb_raw.md" | rows |
      tee -a "$R/llama-bench.md"
  done
}

# same_tokens VAR MODEL_FILE [N]: N (48) greedy tokens of a fixed prompt with VAR=1 and with VAR=0;
# logs whether they are the same (the on/off check the session 13 scripts wrote out each time).
same_tokens() {
  local var=$1 f=$2 n=${3:-48} v b
  b=$(basename "$f" .gguf)
  for v in 1 0; do
    env "$var=$v" timeout 60 "$B/ft" generate --model "$f" --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 \
      --max-tokens "$n" --temperature 0 --ignore-eos --json > "$R/gen_${b}_${var}_$v.json" 2>>"$R/ft.err"
  done
  python3 -c "
import json; a=json.load(open('$R/gen_${b}_${var}_1.json'))['tokens']; b=json.load(open('$R/gen_${b}_${var}_0.json'))['tokens']
print('$b $var on / off:', 'same %d tokens' % len(a) if a == b else 'DIFFER', len(a), len(b))" 2>&1 | tee -a "$R/log.txt"
}

# tokens_under "ENV=V [ENV=V..]" MODEL_FILE: 64 greedy tokens of a fixed prompt under the settings against the
# same with none (the default, generated once per file); logs "same N tokens" or where they first differ.
# FTBIN=NAME runs $B/NAME (as in ab_envs).
tokens_under() {
  local e=$1 f=$2 b t
  b=$(basename "$f" .gguf)
  t=$(echo "$e" | tr ' =,' '__.')
  [ -f "$R/gen_${b}_ref.json" ] || timeout 60 "$B/ft" generate --model "$f" --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 \
      --max-tokens 64 --temperature 0 --ignore-eos --json > "$R/gen_${b}_ref.json" 2>>"$R/ft.err"
  local exe=ft w rest=""
  for w in $e; do [[ $w == FTBIN=* ]] && exe=${w#FTBIN=} || rest="$rest $w"; done
  env $rest timeout 60 "$B/$exe" generate --model "$f" --device cuda --prompt-tokens 1,2,3,4,5,6,7,8 \
      --max-tokens 64 --temperature 0 --ignore-eos --json > "$R/gen_${b}_$t.json" 2>>"$R/ft.err"
  python3 -c "
import json; a=json.load(open('$R/gen_${b}_$t.json'))['tokens']; b=json.load(open('$R/gen_${b}_ref.json'))['tokens']
n=next((i for i,(x,y) in enumerate(zip(a,b)) if x!=y), min(len(a),len(b)))
print('$b [$e] vs default:', 'same %d tokens' % len(a) if a == b else 'DIFFER at %d' % n, len(a), len(b))" 2>&1 | tee -a "$R/log.txt"
}

# chain_sums NAME..: bench/chain_trace.py's per-position table of each $R/NAME.tg128.csv (written by
# FT_CHAIN_TRACE=$R/NAME under a -DFT_CHAIN_TRACE=ON build) into $R/sum_NAME.txt, then the CSVs gzipped.
chain_sums() {
  local t
  for t in "$@"; do
    log "chain: $t"
    python3 bench/chain_trace.py "$R/$t.tg128.csv" --steps 128 2>&1 | tee "$R/sum_$t.txt"
  done
  gzip "$R"/*.csv
}

# ab_envs ROUNDS MODEL_FILE "ENV=V [ENV=V..]" "ENV=V.." .. -- [ft bench args]: ft bench's rows under each
# environment in turn, alternating, ROUNDS rounds (ab_rounds for settings of several variables; "-" for
# none). Rows go to $R/ft.md, each after its log line; stops at AB_BUDGET seconds (default 500).
# FTBIN=NAME in a setting runs $B/NAME instead of $B/ft (another build's binary packed beside it).
ab_envs() {
  local rounds=$1 f=$2 round e
  shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  for round in $(seq "$rounds"); do
    for e in "${envs[@]}"; do
      budget "${AB_BUDGET:-500}" "$e $(basename "$f")" || return 0
      log "$e round $round $(basename "$f")"
      [ "$e" = "-" ] && e=""
      local exe=ft w rest=""
      for w in $e; do [[ $w == FTBIN=* ]] && exe=${w#FTBIN=} || rest="$rest $w"; done
      env "CUDA_MODULE_LOADING=$AB_LOADING" $rest timeout 90 "$B/$exe" bench -m "$f" --device cuda "$@" 2>>"$R/ft.err" | rows |
        sed 's/ | cuda (NVIDIA[^|]*//' | tee -a "$R/ft.md" | ab_values_of "${e:--}" >> "$R/abe_$(basename "$f" .gguf).txt"
    done
  done
}
# ab_values_of LABEL: "LABEL[@TEST] t/s" lines (ab_means' input) from ft bench rows on stdin; spaces in LABEL become
# commas, the test name is added when not tg128.
ab_values_of() {
  local label=${1// /,}
  awk -F'|' -v L="$label" '{t = ""; v = ""
    for (i = 1; i <= NF; i++) { if ($i ~ /^ *(pp|tg)[0-9]/) { t = $i; gsub(/ /, "", t) } if ($i ~ /±/ && v == "") v = $i }
    split(v, a, " "); if (a[1] != "") print (t == "tg128" || t == "" ? L : L "@" t), a[1] }'
}
# ab_env_means MODEL_FILE: each setting's mean over ab_envs' rounds on the file (ab_means of $R/abe_NAME.txt).
ab_env_means() { ab_means "$R/abe_$(basename "$1" .gguf).txt"; }

# ab_preamble PRESET..: the GPU's name and clocks into the log, the presets' files written (models_bg / models_wait).
ab_preamble() {
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
  models_bg "$@"
  models_wait
}

# gpu_preamble SECONDS FILTER PRESET..: ab_preamble with test_cuda (FILTER, "" for all, within SECONDS) run while the
# presets' files are written.
gpu_preamble() {
  local secs=$1 filter=$2
  shift 2
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
  models_bg "$@"
  log "test_cuda ${filter:-(all)}"
  gpu_tests "$secs" "$filter"
  models_wait
}

# ft_bench_each UNTIL SECONDS "ARGS" FILE..: ft bench -m FILE --device cuda ARGS on each file (each within
# SECONDS) while the call is younger than UNTIL seconds; rows (device column dropped) into $R/ft.md.
ft_bench_each() {
  local until=$1 secs=$2 args=$3 f
  shift 3
  for f in "$@"; do
    budget "$until" "ft bench $f" || break
    log "ft bench $(basename "$f")"
    timeout "$secs" "$B/ft" bench -m "$f" --device cuda $args 2>>"$R/ft.err" | rows |
      sed 's/ | cuda (NVIDIA[^|]*//' | tee -a "$R/ft.md"
  done
}

# depth_figures FT_UNTIL LB_WAIT LB_UNTIL FILE..: issue 3's figures at depth 0 / 4096 / 16384 --
# ft bench on each file while the call is younger than FT_UNTIL seconds, then (after llama_wait
# LB_WAIT; llama_build_bg must have started it) llama-bench on each while younger than LB_UNTIL:
#   ft bench -m F --device cuda -p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562
#   llama-bench -m F -p 512 -n 128 -d 0,4096,16384 -ngl 99 -fa 1 -r 2
# Rows into $R/ft.md and $R/llama-bench.md (whole llama-bench tables into $R/lb_raw.md).
depth_figures() {
  local ft_until=$1 lb_wait=$2 lb_until=$3
  shift 3
  ft_bench_each "$ft_until" 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" "$@"
  llama_depth_rows "$lb_wait" "$lb_until" "$@"
}
# llama_depth_rows LB_WAIT LB_UNTIL FILE..: depth_figures' llama.cpp half (llama_wait LB_WAIT, then
# llama-bench at 0 / 4096 / 16384 on each file while the call is younger than LB_UNTIL).
llama_depth_rows() {
  local lb_wait=$1 lb_until=$2 f
  shift 2
  llama_wait "$lb_wait"
  [ -x "${LB:-}" ] || return 0
  for f in "$@"; do
    budget "$lb_until" "llama-bench $f" || break
    log "llama-bench $(basename "$f")"
    timeout 100 "$LB" -m "$f" -p 512 -n 128 -d 0,4096,16384 -ngl 99 -fa 1 -r 2 -o md 2>>"$R/lb.err" |
      tee -a "$R/lb_raw.md" | rows | tee -a "$R/llama-bench.md"
  done
}

# ab_values VAR "V1 V2 .." ROUNDS UNTIL MODEL_FILE [ft bench args]: ft bench's tg t/s with VAR set to each value in
# turn, alternating, ROUNDS rounds while the call is younger than UNTIL seconds; "value t/s" lines into $R/ab_VAR.txt
# (one file a variable: two sweeps in a call keep apart), rows into $R/ft.md; then each value's mean (ab_means) into
# the log. Session 42's size sweeps.
ab_values() {
  local var=$1 vals=$2 rounds=$3 until=$4 f=$5 round v t
  shift 5
  for round in $(seq "$rounds"); do
    for v in $vals; do
      budget "$until" "$var=$v round $round" || break 2
      t=$(env "CUDA_MODULE_LOADING=$AB_LOADING" "$var=$v" timeout 60 "$B/ft" bench -m "$f" --device cuda "$@" 2>>"$R/ft.err" | rows | tee -a "$R/ft.md" |
          awk -F'|' '{for (i = 1; i <= NF; i++) if ($i ~ /±/) {print $i; exit}}' | awk '{print $1}')
      echo "$v $t" | tee -a "$R/ab_$var.txt"
    done
  done
  ab_means "$R/ab_$var.txt"
}
# ab_means [FILE]: bench/ab_means.py on FILE ($R/ab.txt by default): each value's mean and standard deviation, then
# "BEST v" -- the fastest value if it beats the first listed (the baseline) by more than 0.2%, else the baseline.
ab_means() { python3 "$ROOT/bench/ab_means.py" "${1:-$R/ab.txt}" | tee -a "$R/log.txt"; }

# ncu_sass REGEX SKIP COUNT: ncu's source counters of COUNT launches matching REGEX (after SKIP) of a 4-token Llama-8B
# generate: details in $R/details.txt (summary lines printed), the SASS with executed counts in $R/sass.csv.gz
# (bench/sass_mix.py reads it).
ncu_sass() {
  timeout 90 ncu --clock-control none -k "regex:$1" --launch-skip "$2" --launch-count "$3" \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --section LaunchStats -o "$R/mma" --force-overwrite \
    "$B/ft" generate --model "$L" --device cuda --prompt-tokens 1,2,3,4 --max-tokens 4 --temperature 0 --ignore-eos \
    > "$R/ncu_run.txt" 2>&1
  log "ncu rc=$?"
  ncu --import "$R/mma.ncu-rep" --print-details all > "$R/details.txt" 2>&1
  grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|Issue Slots Busy|DRAM Throughput|Grid Size|Block Size" "$R/details.txt" |
    cut -c1-150 | head -60
  ncu --import "$R/mma.ncu-rep" --page source --csv --print-source sass > "$R/sass.csv" 2>&1
  gzip -f "$R/sass.csv"; rm -f "$R/mma.ncu-rep"
}
