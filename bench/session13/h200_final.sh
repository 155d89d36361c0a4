#!/usr/bin/env bash
# Session 13, final call (binaries of the commit named in benches/h200.md): the whole GPU test
# suite, the GEMV kernels (--experts), and issue 3's end-to-end figures beside llama.cpp's CUDA
# build in the same call: ft bench -p 512 -n 128 -d 0,4096,16384 -r 2; llama-bench -p 512 -n 128
# -ngl 99 -fa 1 -r 2.
#   run(command="timeout -s KILL 585 bash bench/session13/h200_final.sh; tar czf $OUT/resz.tgz -C /tmp resz",
#       carry=[".devcarry/pack"])
R=/tmp/resz
source bench/device_common.sh
llama_build_bg
log "test_cuda (all)"
(cd $B && timeout 260 ./test_cuda --gtest_brief=1 > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|exception" $R/test.txt | tail -12
model llama8b-nvfp4; model qwen3moe-30b-nvfp4
L=$M/llama8b-nvfp4.gguf; Q=$M/qwen3moe-30b-nvfp4.gguf
[ -x $B/ft-bench-gemv-cuda ] && timeout 60 $B/ft-bench-gemv-cuda --experts --launches 40 --pool-gib 0.5 > $R/experts.txt 2>&1
grep -E "^\| " $R/experts.txt | awk -F'|' '{print $2,$5,$7,$9,$11}' | head -48
for f in $L $Q; do
  budget 420 "ft bench $f" || break
  log "ft bench $(basename $f)"
  timeout 100 "$B/ft" bench -m $f --device cuda -p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
done
llama_wait 470
llama_bench_rows 560 $L $Q
finish resz
