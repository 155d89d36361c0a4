#!/usr/bin/env bash
# Session 21, call 2: the lean expert kernels (gemv_nvfp4_experts.cu, FT_GEMV_NVFP4_EXPERTS): bits against
# the slab / packed kernels and the MoE backends' tests, Qwen3-30B-A3B tg128 on / off alternating, the
# greedy tokens on / off, and ncu of the decode step's MoE kernels (instructions, as call 1).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 420 bash bench/session21/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
gpu_tests 200 'CudaGemvExperts.*:CudaGemvNvfp4.*:CudaGemv.*:CudaMoeFusedDecode.*:Models/GpuVsCpu.*:Tiny/*'
models_wait
AB_BUDGET=250 ab_envs 3 $Q - FT_GEMV_NVFP4_EXPERTS=0 -- -p 0 -n 128 -r 1 --bw-gbs 4562
budget 270 tokens && same_tokens FT_GEMV_NVFP4_EXPERTS $Q 48
NCU="ncu --clock-control none -k regex:slab_kernel|packed_kernel|experts_|swiglu_kernel"
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
if budget 320 ncu; then
  log ncu
  timeout 90 $NCU $SEC --launch-skip 800 --launch-count 8 -o $R/moe --force-overwrite \
    $B/ft generate --model $Q --device cuda --prompt-tokens 1,2,3,4 --max-tokens 6 --temperature 0 --ignore-eos > $R/ncu_run.txt 2>&1
  log "ncu rc=$?"
  ncu --import $R/moe.ncu-rep --page raw --csv --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,gpu__time_duration.sum,launch__grid_size,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active > $R/stalls.csv 2>&1
  python3 - "$R/stalls.csv" <<'PY'
import csv,sys
rows=list(csv.reader(open(sys.argv[1])))
hi=[i for i,r in enumerate(rows) if 'Kernel Name' in r][0]
h=rows[hi]
for r in rows[hi+2:]:
    d=dict(zip(h,r))
    print(d['Kernel Name'][:70], 'us', d.get('gpu__time_duration.sum'), 'inst', d.get('smsp__inst_executed.sum'), 'issue%', d.get('smsp__issue_active.avg.pct_of_peak_sustained_active'))
PY
fi
finish resb
