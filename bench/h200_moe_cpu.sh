#!/usr/bin/env bash
# One device call for the cpu / hybrid MoE backends (run from the folder holding the packed
# binaries: test_cuda, test_moe_cpu, ft, ft-bigmodel and their libraries):
#   the moe_cpu unit tests and the GPU tests (handshake, 256 greedy tokens vs fused),
#   ft bench-bw (host read, pinned H2D, CPU expert GEMV, gather, concurrent),
#   ft bench decode on the Qwen3-30B-A3B-shaped NVFP4 file: cpu, hybrid and offload at half
#   the experts cached.
# Every step has its own timeout so a slow one leaves the others' results.
set -uo pipefail
OUT=${OUT:-/tmp/ft-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
log() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
log "host: $(nproc) cpus; $(lscpu | grep -E 'Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)' | tr -s ' ' | tr '\n' ';')"
lscpu | grep -o -E 'avx512_vnni|avx512_bf16|avx_vnni|amx_tile' | sort -u | tr '\n' ' '; echo
log "unit tests"
timeout 30 ./test_moe_cpu --gtest_brief=1 2>&1 | tail -2
timeout 60 ./test_cuda --gtest_filter='MoeCpu*:*MoeBackendTokens*' --gtest_brief=1 > "$OUT/gpu_tests.txt" 2>&1
grep -E "HANDSHAKE|MOE-TOKENS|FAILED|PASSED|Failure|rror" "$OUT/gpu_tests.txt" | cut -c1-220 | sort | uniq -c | sort -rn | head -40
log "bench-bw"
timeout 25 ./ft bench-bw --format nvfp4,q4_K --out "$OUT/bw.json" 2>&1 | tail -20
timeout 12 ./ft bench-bw --format nvfp4 --threads 16 --iters 32 --reps 5 --host-mib 512 2>&1 | grep -E "pool|host read|GEMV|concurrent"
M=/tmp/moecpu-models
mkdir -p $M
log "model"
timeout 60 ./ft-bigmodel --preset qwen3moe-30b-nvfp4 -o $M/q30.gguf -q 2>&1 | head -2
log "bench cpu"
timeout 40 ./ft bench -m $M/q30.gguf --device cuda --moe-backend cpu -p 512 -n 32 -r 1 2>"$OUT/cpu.err" | tail -3
grep -E "moe backend|moe cpu|handshake" "$OUT/cpu.err" | cut -c1-400
log "bench hybrid 0.5"
timeout 35 ./ft bench -m $M/q30.gguf --device cuda --moe-backend hybrid --moe-cache-rate 0.5 -p 0 -n 32 -r 1 2>"$OUT/hyb.err" | tail -1
grep -E "moe backend|moe cpu" "$OUT/hyb.err" | cut -c1-300
log "bench offload 0.5"
timeout 25 ./ft bench -m $M/q30.gguf --device cuda --moe-backend offload --moe-cache-rate 0.5 -p 0 -n 32 -r 1 2>"$OUT/off.err" | tail -1
log "bench cpu, cudaLaunchHostFunc handshake"
FT_MOE_CPU_HOSTFUNC=1 timeout 25 ./ft bench -m $M/q30.gguf --device cuda --moe-backend cpu -p 0 -n 32 -r 1 2>/dev/null | tail -1
log "done"
