#!/usr/bin/env bash
# Session 11, call 4: the bulk-copy NVFP4 GEMV (gemv_mma_bulk.cu): its bit-for-bit tests, the
# kernels beside the one-wave reads (--sol), and end to end on Llama-8B / Qwen3-30B-A3B with
# FT_GEMV_NVFP4_BULK unset / 1 / 2 beside llama.cpp's CUDA build in the same call.
#   run(command="timeout -s KILL 585 bash bench/session11/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
llama_build_bg
log "tests: bulk kernel, GEMV"
(cd $B && timeout 100 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemvBulk*:CudaGemvPersist*:*GpuVsCpu*nvfp4*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=" $R/test.txt | tail -8
log "kernels: --sol with the bulk GEMV"
timeout 120 $B/ft-bench-gemv-cuda --sol --launches 40 --pool-gib 0.5 > $R/sol.txt 2>&1; grep -E "^\||note" $R/sol.txt | cut -c1-300
model llama8b-nvfp4
model qwen3moe-30b-nvfp4
L=$M/llama8b-nvfp4.gguf; Q=$M/qwen3moe-30b-nvfp4.gguf
ftb() { timeout 90 "$B/ft" bench -m $1 --device cuda -p 512 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | tee -a $R/ft.md; }
for f in $L $Q; do
  for v in "" 1 2 "2,8,4"; do
    budget 380 "ft $v" || break
    log "$(basename $f) FT_GEMV_NVFP4_BULK=$v"
    FT_GEMV_NVFP4_BULK=$v ftb $f
  done
done
log "greedy tokens, bulk off / 1 / 2"
for v in "" 1 2; do
  FT_GEMV_NVFP4_BULK=$v timeout 40 "$B/ft" generate --model $L --device cuda --prompt-tokens 128000,791,6864,315 --max-tokens 32 --temperature 0 --ignore-eos --json 2>/dev/null | grep -o '"tokens":\[[^]]*\]' | tee -a $R/tokens.txt | md5sum | sed "s/^/bulk=$v /"
done
llama_wait 420
if [ -x "${LB:-}" ]; then
  for f in $L $Q; do
    budget 540 "llama-bench $f" || break
    timeout 60 $LB -m $f -p 512 -n 128 -ngl 99 -fa 1 -r 2 -o md 2>>$R/lb.err | tee -a $R/lb_raw.md | rows | tee -a $R/llama-bench.md
  done
fi
if budget 560 "best again"; then
  FT_GEMV_NVFP4_BULK=2 ftb $L
fi
finish resc
