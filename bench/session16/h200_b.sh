#!/usr/bin/env bash
# Session 16, call 2: why the one-launch MoE experts (FT_MOE_FUSED_DECODE=1) ran 3.8% slower than
# the three launches in call 1 -- every kernel's serialised duration in a Qwen3-30B-A3B decode step
# with it on and off (ncu gpu__time_duration, bench/ncu_step.py), tg128 with one phase-1 stage a
# warp (FT_MOE_FUSED_A_SLOTS=1) against two and against off, and the launch-chain probe's table
# (its shared-memory opt-in fixed after call 1's cudaErrorInvalidValue).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-chain-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session16/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
models_bg qwen3moe-30b-nvfp4
timeout 60 "$B/ft-bench-chain-cuda" --check 2>&1 | tee $R/check.txt
timeout 90 "$B/ft-bench-chain-cuda" 2>&1 | tee $R/chain.md
models_wait
Q=$M/qwen3moe-30b-nvfp4.gguf
AB_BUDGET=260 ab_envs 2 $Q FT_MOE_FUSED_DECODE=1 "FT_MOE_FUSED_DECODE=1 FT_MOE_FUSED_A_SLOTS=1" FT_MOE_FUSED_DECODE=0 -- \
  -p 0 -n 128 -r 2 --bw-gbs 4562
for v in 1 0; do
  budget 450 "ncu $v" || break
  log "ncu FT_MOE_FUSED_DECODE=$v"
  FT_MOE_FUSED_DECODE=$v timeout 80 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    $B/ft generate --model $Q --device cuda --prompt-tokens 1,2,3,4 --max-tokens 3 \
    --temperature 0 --ignore-eos > $R/ncu_$v.csv 2>$R/ncu_$v.err
  python3 bench/ncu_step.py $R/ncu_$v.csv --layers 48 2>&1 | tee $R/ncu_$v.md | head -16
done
budget 500 "chain probe --stages 12" && timeout 45 "$B/ft-bench-chain-cuda" --stages 12 2>&1 | tee -a $R/chain.md
finish resb
