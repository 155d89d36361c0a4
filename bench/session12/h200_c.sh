#!/usr/bin/env bash
# Session 12, call 3: the mma GEMV with the decoder's shifts / complements on the FMA pipe and
# one-base-pointer copies (gemv_mma.cuh e2m1x8_pn_fma, gemv_mma.cu issue()): bit-for-bit tests,
# SASS mix, kernel times (routed / slab / mma, b2b and dep), Llama-8B and Qwen3-30B-A3B end to
# end with the plan and with every shape on the mma kernel, ncu of a decode step.
#   run(command="timeout -s KILL 560 bash bench/session12/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
(cd $B && timeout 120 ./test_cuda --gtest_brief=1 --gtest_filter='CudaGemv*:ActQ8*:*GpuVsCpu*:CudaMoe*' > $R/test.txt 2>&1; echo "rc=$?" >> $R/test.txt)
grep -E "tests? ran|PASSED|FAILED|rc=|Failure|differs|exception" $R/test.txt | head -12
cuobjdump -sass $B/ft 2>/dev/null | awk '/Function : /{f=($0 ~ /nvfp4_mma_kernelILi4ELi2E/)} f' > $R/sass_mma42.txt
grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+(@!?U?P[0-9T] )?[A-Z0-9]+' $R/sass_mma42.txt | awk '{print $NF}' | sort | uniq -c | sort -rn | head -25 | tr '\n' ' '; echo
model llama8b-nvfp4; model qwen3moe-30b-nvfp4
timeout 120 $B/ft-bench-gemv-cuda --experts --launches 40 --pool-gib 0.5 > $R/experts.txt 2>&1; grep -E "^\| " $R/experts.txt | cut -c1-200
for m in llama8b-nvfp4 qwen3moe-30b-nvfp4; do
  for v in "" 1; do
    budget 420 "ft bench $m $v" || break
    log "$m FT_GEMV_NVFP4_MMA=$v"
    FT_GEMV_NVFP4_MMA=$v timeout 60 "$B/ft" bench -m $M/$m.gguf --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>$R/ft.err | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a $R/ft.md
  done
done
budget 440 "dense sweep" && { timeout 60 $B/ft-bench-gemv-cuda --dense --launches 40 --pool-gib 0.5 > $R/dense.txt 2>&1; grep -E "^\| " $R/dense.txt | cut -c1-160; }
budget 470 ncu && {
NCU="ncu --clock-control none -k regex:nvfp4_mma_kernel|slab_kernel"
timeout 70 $NCU --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --launch-skip 246 --launch-count 4 -o $R/plan --force-overwrite \
  $B/ft generate --model $M/llama8b-nvfp4.gguf --device cuda --prompt-tokens 1,2,3,4 --max-tokens 6 --temperature 0 --ignore-eos > $R/ncu_run.txt 2>&1
ncu --import $R/plan.ncu-rep --print-details all > $R/details.txt 2>&1
grep -E "^  [a-zA-Z_].*(kernel|Kernel)|Duration|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy|^    ALU |^    FMA " $R/details.txt | head -60
ncu --import $R/plan.ncu-rep --page raw --csv --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,gpu__time_duration.sum > $R/stalls.csv 2>&1
}
finish resc
