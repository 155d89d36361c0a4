#!/usr/bin/env bash
# One device call for ft alone (no llama.cpp build): the gpu tests and GPU parity
# (scripts/device-test.sh), then ft bench on the two realistic-size NVFP4 files at depths 0,
# 4096, 16384, the same decode with graphs off and with FT_CUDA_PDL=0, and a per-kernel
# time profile (ncu, graphs off) of one decode step of a 4-layer Qwen3-30B-A3B-shaped file.
# Carried: .devcarry/pack (scripts/pack-device.sh). Results under $OUT (<= 8 files).
set -uo pipefail
ROOT=$PWD
OUT=${OUT:-/tmp/ft-out}
mkdir -p "$OUT"
[ -x .devcarry/bin/ft ] || tar xJf .devcarry/pack/bin.tar.xz -C .devcarry
B=$ROOT/.devcarry/bin
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
log() { echo "[$(date -u +%T)] $*" | tee -a "$OUT/log.txt"; }
log "tests"
bash scripts/device-test.sh > "$OUT/summary.txt" 2>&1
M=/tmp/ft-models
mkdir -p $M
log "models"
"$B/ft-bigmodel" --preset llama8b-nvfp4 -o $M/llama8b.gguf -q >>"$OUT/log.txt" 2>&1
"$B/ft-bigmodel" --preset qwen3moe-30b-nvfp4 -o $M/qwen3moe.gguf -q >>"$OUT/log.txt" 2>&1
"$B/ft-bigmodel" --preset qwen3moe-30b-nvfp4 --layers 4 -o $M/qwen3moe4.gguf -q >>"$OUT/log.txt" 2>&1
for m in llama8b qwen3moe; do
  log "bench $m"
  timeout 150 "$B/ft" bench -m $M/$m.gguf --device cuda -p 512 -n 128 -d 0,4096,16384 --bw-gbs 4562 \
    >>"$OUT/bench.md" 2>>"$OUT/log.txt"
  log "bench $m graphs off / PDL off"
  FT_CUDA_GRAPHS=0 timeout 60 "$B/ft" bench -m $M/$m.gguf --device cuda -p 0 -n 128 --bw-gbs 4562 \
    2>>"$OUT/log.txt" | tail -1 >>"$OUT/bench.md"
  FT_CUDA_PDL=0 timeout 60 "$B/ft" bench -m $M/$m.gguf --device cuda -p 0 -n 128 --bw-gbs 4562 \
    2>>"$OUT/log.txt" | sed 's/graphs |/graphs, FT_CUDA_PDL=0 |/' | tail -1 >>"$OUT/bench.md"
done
grep -h "cuda memory" "$OUT/log.txt" | sort -u >>"$OUT/bench.md"
log "ncu"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  FT_CUDA_GRAPHS=0 timeout 120 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    "$B/ft" generate --model $M/qwen3moe4.gguf --device cuda --prompt-tokens 1 --max-tokens 2 \
    --temperature 0 --ignore-eos >"$OUT/ncu.csv" 2>>"$OUT/log.txt" || log "ncu failed ($?)"
else
  log "no ncu"
fi
# In-graph kernel times (graphs on, warm caches, as decode really runs), where nsys exists.
NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
  "$B/ft-bigmodel" --preset llama8b-nvfp4 --layers 4 -o $M/llama4.gguf -q >>"$OUT/log.txt" 2>&1
  for m in qwen3moe4 llama4; do
    log "nsys $m"
    timeout 120 "$NSYS" profile --cuda-graph-trace=node -t cuda -o /tmp/nsys-$m -f true \
      "$B/ft" generate --model $M/$m.gguf --device cuda --prompt-tokens 8 --max-tokens 64 \
      --temperature 0 --ignore-eos >>"$OUT/log.txt" 2>&1 || log "nsys failed ($?)"
    "$NSYS" stats -q --report cuda_gpu_kern_sum --format csv /tmp/nsys-$m.nsys-rep >"$OUT/nsys-$m.csv" 2>>"$OUT/log.txt"
  done
else
  log "no nsys"
fi
# GEMV_PROFILE=1: stall reasons of the NVFP4 slab GEMV (ncu sections) and its SASS, for
# the kernel work that follows.
if [ "${GEMV_PROFILE:-0}" = 1 ] && [ -n "$NCU" ]; then
  log "gemv profile"
  (cd "$B" && timeout 120 "$NCU" --clock-control none --kernel-name regex:slab_kernel --launch-skip 40 --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats \
    ./ft-bench-gemv-cuda --nvfp4 --quick --no-sweep >"$OUT/gemv_ncu.txt" 2>&1) || log "gemv ncu failed"
  CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
  [ -n "$CUOBJ" ] && "$CUOBJ" -sass "$B/ft-bench-gemv-cuda" 2>/dev/null | \
    awk '/Function : .*slab_kernelILi1ELi2ELb0ELi16E/{p=1} p&&/Function : /&&!/slab_kernelILi1ELi2ELb0ELi16E/{p=0} p' \
    | head -3000 | xz -3 >"$OUT/slab_1_2.sass.xz"
fi
log "done"
cat "$OUT/summary.txt" | cut -c1-250 | grep -v "^GPU-VS-CPU" | tail -45
cat "$OUT/bench.md"
