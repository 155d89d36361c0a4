#!/usr/bin/env bash
# Session 14, final call (binaries of the commit named in benches/h200.md): the whole GPU test
# suite, the down experts' early start on / off (FT_MOE_IDS_EARLY, alternating, and the same greedy
# tokens), and issue 3's end-to-end figures beside llama.cpp's CUDA build in the same call:
# ft bench -p 512 -n 128 -d 0,4096,16384 -r 2; llama-bench -p 512 -n 128 -ngl 99 -fa 1 -r 2.
#   run(command="timeout -s KILL 585 bash bench/session14/h200_final.sh; tar czf $OUT/resz.tgz -C /tmp resz",
#       carry=[".devcarry/pack"])
R=/tmp/resz
source bench/device_common.sh
llama_build_bg
(model llama8b-nvfp4; model qwen3moe-30b-nvfp4) > $R/models.txt 2>&1 &
MP=$!
log "test_cuda (all)"
(cd $B && timeout 270 ./test_cuda --gtest_brief=1 > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|exception" $R/test.txt | tail -12
wait $MP; cat $R/models.txt
L=$M/llama8b-nvfp4.gguf; Q=$M/qwen3moe-30b-nvfp4.gguf
AB_BUDGET=330 ab_rounds FT_MOE_IDS_EARLY "1 0" 2 $Q -p 0 -n 128 -r 2 --bw-gbs 4562
same_tokens FT_MOE_IDS_EARLY $Q
for f in $L $Q; do
  budget 450 "ft bench $f" || break
  log "ft bench $(basename $f)"
  timeout 100 "$B/ft" bench -m $f --device cuda -p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
done
llama_wait 490
llama_bench_rows 575 $L $Q
finish resz
