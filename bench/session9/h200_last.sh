#!/usr/bin/env bash
# Session 9, last call: ft generate's new decode timing on offload (the PCIe cost model), and
# a second same-call cpu backend vs llama.cpp -ncmoe 48 comparison (alternating, after
# llama.cpp's build so that it does not share the CPU with either).
R=/tmp/resL
source bench/device_common.sh
llama_build_bg
model qwen3moe-30b-nvfp4
Q=$M/qwen3moe-30b-nvfp4.gguf
log "ft generate offload 0.5 --stats (512-token prompt, 64 tokens)"
FT_STEP_CLOCK=1 timeout 45 "$B/ft" generate --model $Q --device cuda --moe-backend offload --moe-cache-rate 0.5 --prompt-tokens $(seq -s, 1000 1511) \
  --max-tokens 64 --ignore-eos --temperature 0 --stats > $R/gen_offload.txt 2>&1
grep -h "decode [0-9]* tokens" $R/gen_offload.txt | sed 's/ | cuda.*//'
grep -h "per decode step\|speculative fetches\|step clock" $R/gen_offload.txt | cut -c1-300
llama_wait 330
if [ -x $LB ]; then
  for i in 1 2; do
    log "llama-bench -ncmoe 48, 16 threads ($i)"
    timeout 30 $LB -m $Q -p 0 -n 32 -ngl 99 -fa 1 -ncmoe 48 -t 16 -r 2 -o md 2>>$R/lb.err | grep tg32 | tee -a $R/llama-bench.md
    log "ft cpu backend ($i)"
    timeout 40 "$B/ft" bench -m $Q --device cuda --moe-backend cpu -p 0 -n 32 -r 2 2>$R/cpu_$i.err | tail -1 | grep -o "tg32 | [0-9.]* ± [0-9.]*" | tee -a $R/ft.md
  done
fi
finish resL
