#!/usr/bin/env bash
# Session 16, call 3: where the decode attention's time goes at depth (ncu --set full of one
# launch: Qwen3-30B-A3B shape at 4096 live keys, Llama-8B at 16384; f16 caches as the engine
# keeps them), the attention benchmark's default plans, and issue 3's figures at depth 0 / 4096 /
# 16384 beside llama.cpp v0.5.0's CUDA build in the same call:
#   ft bench -m F --device cuda -p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562
#   llama-bench -m F -p 512 -n 128 -d 0,4096,16384 -ngl 99 -fa 1 -r 2
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-chain-cuda ft-bench-attention-cuda" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 590 bash bench/session16/h200_c.sh; tar czf $OUT/resc.tgz -C /tmp resc",
#       carry=[".devcarry/pack"])
R=/tmp/resc
source bench/device_common.sh
llama_build_bg
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "attention benchmark"
timeout 120 "$B/ft-bench-attention-cuda" --kv f16 --decode-only 2>&1 | tee $R/attn.txt | grep -E "^decode|streaming"
for c in qwen3-30b-a3b:4096 llama-8b:16384; do
  log "ncu attention $c"
  timeout 60 ncu --set full -k regex:attn_decode -c 1 -o $R/ncu_${c%%:*} "$B/ft-bench-attention-cuda" --kv f16 --only $c > $R/ncu_${c%%:*}.log 2>&1
  ncu -i $R/ncu_${c%%:*}.ncu-rep --page details > $R/ncu_${c%%:*}.txt 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Block Limit|Grid Size|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" $R/ncu_${c%%:*}.txt | head -20
done
models_wait
L=$M/llama8b-nvfp4.gguf; Q=$M/qwen3moe-30b-nvfp4.gguf
depth_figures 330 360 575 $L $Q
finish resc
