#!/usr/bin/env bash
# Session 16, call 6: the tensor-core decode attention in the engine (one token from 1024 live
# keys: rope + KV store launch, attn_mma_decode + combine; FT_ATTN_MMA_MIN_KEYS, 0 = off): the
# attention and session tests, then tg128 at depth 0 / 4096 / 16384 with it on (default) and off,
# alternating, on both models, and 48 greedy tokens with it from the first key vs off.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session16/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"])
R=/tmp/rese
source bench/device_common.sh
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "tests"
(cd $B && timeout 200 ./test_cuda --gtest_brief=1 --gtest_filter='CudaAttention.*:GpuAttentionMma.*:GpuVsCpu.*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|ATTN-MMA" $R/test.txt | head -20
models_wait
L=$M/llama8b-nvfp4.gguf; Q=$M/qwen3moe-30b-nvfp4.gguf
for f in $Q $L; do
  AB_BUDGET=470 ab_envs 2 $f FT_ATTN_MMA_MIN_KEYS=1024 FT_ATTN_MMA_MIN_KEYS=0 -- -p 0 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562
done
budget 520 "same tokens" && same_tokens FT_ATTN_MMA_MIN_KEYS $Q
finish rese
