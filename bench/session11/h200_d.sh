#!/usr/bin/env bash
# Session 11, call 5: call 4 again after its two mends (the bulk kernel's shared-memory opt-in
# counted without its static barriers; the persistent test's fold reset too early), with 8 and
# 16 consumer warps. No llama.cpp (device time): call 4's llama-bench rows are the comparison.
#   run(command="timeout -s KILL 560 bash bench/session11/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
log "tests: bulk kernel, persistent kernel"
(cd $B && timeout 100 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemvBulk*:CudaGemvPersist*:*GpuVsCpu*nvfp4*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|exception" $R/test.txt | head -12
# A bulk kernel that fails its tests (or hangs them) is not run end to end.
BULK_OK=1
grep -q "FAILED.*CudaGemvBulk\|rc=124\|rc=137" $R/test.txt && BULK_OK=0 && log "bulk tests failed: end-to-end bulk runs skipped"
log "kernels: --sol with the bulk GEMV at 4 / 8 / 16 warps"
[ $BULK_OK = 1 ] && timeout 150 $B/ft-bench-gemv-cuda --sol --launches 40 --pool-gib 0.5 > $R/sol.txt 2>&1; grep -E "^\| [0-9e]|note|rror" $R/sol.txt | cut -c1-330
model llama8b-nvfp4
model qwen3moe-30b-nvfp4
L=$M/llama8b-nvfp4.gguf; Q=$M/qwen3moe-30b-nvfp4.gguf
ftb() { timeout 45 "$B/ft" bench -m $1 --device cuda -p 512 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md; }
for f in $L $Q; do
  for v in "" 1 2 "2,8,4" "2,16,4" "2,16,3"; do
    [ -n "$v" ] && [ $BULK_OK = 0 ] && break
    budget 420 "ft $v" || break
    log "$(basename $f) FT_GEMV_NVFP4_BULK=$v"
    FT_GEMV_NVFP4_BULK=$v ftb $f
  done
done
log "greedy tokens (Llama-8B, 32)"
for v in "" 1 2 "2,16,4"; do
  budget 500 "tokens $v" || break
  FT_GEMV_NVFP4_BULK=$v timeout 40 "$B/ft" generate --model $L --device cuda --prompt-tokens 128000,791,6864,315 --max-tokens 32 --temperature 0 --ignore-eos --json 2>/dev/null | grep -o '"tokens":\[[^]]*\]' | tee -a $R/tokens.txt | md5sum | sed "s/^/bulk=$v /"
done
grep -h "rror\|fail" $R/ft.err | sort | uniq -c | head -5
finish resd
