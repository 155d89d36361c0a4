#!/usr/bin/env bash
# Session 9, call 1: the cpu backend's warm-up (FT_MOE_CPU_WARM_KIB) A/B on the
# Qwen3-30B-A3B-shaped NVFP4 file, beside the MoE backend token tests. No llama.cpp here.
R=/tmp/resW
source bench/device_common.sh
log "MoE backend tests (background)"
(cd $B && timeout 150 ./test_cuda --gtest_brief=1 --gtest_filter='MoeBackendTokens*:MoeCpu*:*HybridVsFused*:Qwen35MoeBackends*' > $R/test_moe.txt 2>&1; echo "test_moe rc=$?" >> $R/log.txt) &
(cd $B && timeout 60 ./test_moe_cpu --gtest_brief=1 > $R/test_moe_cpu.txt 2>&1; echo "test_moe_cpu rc=$?" >> $R/log.txt) &
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
wait
grep -E "tests? ran|PASSED|FAILED" $R/test_moe.txt $R/test_moe_cpu.txt | tail -8
grep -h "warm-up" $R/test_moe.txt | head -3
for kib in 0 768 0 768 0 768 1536; do
  [ $(($(date +%s) - T0)) -lt 300 ] || { log "skipped (time) kib=$kib"; continue; }
  log "cpu backend tg32, FT_MOE_CPU_WARM_KIB=$kib"
  FT_MOE_CPU_WARM_KIB=$kib FT_MOE_CPU_PROFILE=1 timeout 60 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 0 -n 32 -r 3 \
    2> $R/cpu_$kib.err | tail -1 | tee -a $R/ft.md
  grep -h "warm-up\|us of CPU expert work\|moe cpu: profile\|gate|up" $R/cpu_$kib.err | tail -3
done
if [ $(($(date +%s) - T0)) -lt 330 ]; then
  log "generate cpu backend, 512-token prompt, warm 768 vs 0"
  for kib in 768 0; do
    FT_MOE_CPU_WARM_KIB=$kib timeout 50 "$B/ft" generate --model $Q --device cuda --moe-backend cpu --prompt-tokens $(seq -s, 1000 1511) \
      --max-tokens 48 --ignore-eos --temperature 0 > $R/gen_cpu_$kib.txt 2>&1
    grep -h "decode\|warm-up" $R/gen_cpu_$kib.txt | tail -3
  done
fi
finish resW
