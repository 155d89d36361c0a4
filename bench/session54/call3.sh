#!/usr/bin/env bash
# Session 54 call 3 (~280 s, any GPU; on an H200 session 51's h200.sh instead): main at the end -- test_cuda (all), the
# warm-up with the driver's default (lazy) module loading, as users run (ft generate, 8- and 40-token prompts, with
# and without --no-warmup), and the batch runner on Qwen3-30B-A3B with the one-wave batch GEMV on / off.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session54/call3.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
source bench/session53/h200_or.sh
R=/tmp/res54c
source bench/device_common.sh
source bench/session53/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda (all)"
gpu_tests_until 230
grep -E "Failure|FAILED" "$R/test_all.txt" | head -20
models_wait
for w in on off on off; do
  for prompt in 1,2,3,4,5,6,7,8 $(seq -s, 1 40); do
    flag=; [ $w = off ] && flag=--no-warmup
    n=$(echo $prompt | tr , '\n' | wc -l)
    timeout 60 "$B/ft" generate --model "$L" --device cuda --prompt-tokens "$prompt" --max-tokens 32 --temperature 0 \
      --ignore-eos --json $flag > "$R/gen_${w}_$n.json" 2> "$R/gen_${w}_$n.err"
    log "warm-up $w (lazy loading), $n prompt tokens: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['timings'])" "$R/gen_${w}_$n.json" 2>&1 | tail -1) $(grep -ho "warm-up [0-9]* ms" "$R/gen_${w}_$n.err")"
  done
done
L=$Q  # bb runs on $L
budget 420 "qwen wave" && bb qwave1 32 FT_GEMV_NVFP4_BATCH_WAVE=1
budget 440 "qwen no wave" && bb qwave0 32 FT_GEMV_NVFP4_BATCH_WAVE=0
finish res54c
