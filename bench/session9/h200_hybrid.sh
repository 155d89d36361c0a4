#!/usr/bin/env bash
# Session 9, call 3: the hybrid backend's warm-up (the CPU's share of the next layer's
# guesses) on/off, the MoE backend token tests, and the CPU rows at 128 experts (alone).
R=/tmp/resH
source bench/device_common.sh
log "CPU rows: 15 threads, 128 experts (nothing else running)"
$B/ft-bench-moe-cpu --threads 15 --types nvfp4,mxfp4,q8_0,bf16 --isas avx512 --mib 1024 --iters 60 --rounds 2 2>&1 | grep -E "host read|exact|engine|^[a-z0-9_]+ H" | tee -a $R/rows.txt
log "MoE backend tests (background) + model"
(cd $B && timeout 170 ./test_cuda --gtest_brief=1 --gtest_filter='MoeBackendTokens*:MoeCpu*:*HybridVsFused*:*OffloadVsFused*' > $R/test_moe.txt 2>&1; echo "test_moe rc=$?" >> $R/log.txt) &
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
wait
grep -E "tests? ran|PASSED|FAILED" $R/test_moe.txt | tail -6
grep -h "MOE-TOKENS" $R/test_moe.txt | awk '{print $4, $5, $6, $7, $8}' | sort | uniq -c | head -20
for kib in 768 0 768 0; do
  log "hybrid generate, FT_MOE_CPU_WARM_KIB=$kib"
  FT_MOE_CPU_WARM_KIB=$kib FT_MOE_CPU_PROFILE=1 timeout 50 "$B/ft" generate --model $Q --device cuda --moe-backend hybrid --moe-cache-rate 0.5 \
    --prompt-tokens $(seq -s, 1000 1511) --max-tokens 48 --ignore-eos --temperature 0 --stats > $R/gen_h$kib.txt 2>&1
  grep -h "decode\|warm-up:\|us of CPU expert work" $R/gen_h$kib.txt | grep -v "^\[info\] load\|moe backend" | tail -3 | cut -c1-200
done
for kib in 768 0; do
  log "hybrid bench tg32, FT_MOE_CPU_WARM_KIB=$kib"
  FT_MOE_CPU_WARM_KIB=$kib timeout 40 "$B/ft" bench -m $Q --device cuda --moe-backend hybrid --moe-cache-rate 0.5 -p 0 -n 32 -r 3 \
    2> $R/hb_$kib.err | tail -1 | sed 's/(CPU experts.*MiB)//' | cut -c1-100,300-500 | tee -a $R/ft.md
done
log "offload bench tg32"
timeout 40 "$B/ft" bench -m $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 -p 0 -n 32 -r 3 2> $R/ob.err | tail -1 | cut -c1-100,300-500 | tee -a $R/ft.md
finish resH
