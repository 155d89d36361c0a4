#!/usr/bin/env bash
# Session 9, call 2: the CPU expert rows' register fold (add4) and the cpu backend's warm-up
# on the H200 host: the rows' compute rate (one thread, L2-resident experts) and at 128
# experts with 15 threads, the cpu backend's tg32 with the warm-up off / on (alternating), and
# the hybrid backend's per-layer CPU time and PCIe timeline beside offload.
R=/tmp/resC
source bench/device_common.sh
model qwen3moe-30b-nvfp4 &
log "CPU rows: one thread, L2-resident experts (compute rate)"
$B/ft-bench-moe-cpu --threads 1 --types nvfp4 --isas avx512,avx2 --mib 64 --n-expert 2 --n-used 2 --n-ff 128 --iters 3000 --rounds 2 --sched flow 2>&1 | grep -E "host read|exact|engine" | tee -a $R/rows.txt
log "CPU rows: 15 threads, 128 experts"
$B/ft-bench-moe-cpu --threads 15 --types nvfp4,mxfp4,q8_0,bf16 --isas avx512 --mib 1024 --iters 60 --rounds 2 2>&1 | grep -E "host read|exact|engine|^[a-z0-9_]+ H" | tee -a $R/rows.txt
wait
Q=$M/qwen3moe-30b-nvfp4.gguf
for kib in 0 768 0 768; do
  log "cpu backend tg32, FT_MOE_CPU_WARM_KIB=$kib"
  FT_MOE_CPU_WARM_KIB=$kib FT_MOE_CPU_PROFILE=1 timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 0 -n 32 -r 3 \
    2> $R/cpu_$kib.err | tail -1 | sed 's/(CPU experts.*MiB)//' | tee -a $R/ft.md
  grep -h "warm-up:\|us of CPU expert work\|executor:" $R/cpu_$kib.err | tail -3 | cut -c1-220
done
for be in offload hybrid; do
  log "ft generate $be 0.5 --stats (profile + gather clock), 512-token prompt, 48 tokens"
  FT_MOE_CPU_PROFILE=1 FT_MOE_GATHER_CLOCK=1 timeout 50 "$B/ft" generate --model $Q --device cuda --moe-backend $be --moe-cache-rate 0.5 \
    --prompt-tokens $(seq -s, 1000 1511) --max-tokens 48 --ignore-eos --temperature 0 --stats > $R/gen_$be.txt 2>&1
  grep -h "decode\|us of CPU expert work\|executor:\|PCIe\|gather\|hit" $R/gen_$be.txt | grep -v "^\[info\] load" | tail -8 | cut -c1-300
done
finish resC
