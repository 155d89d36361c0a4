#!/usr/bin/env bash
# Session 54 call 2 (~200 s, any GPU; on an H200 session 51's h200.sh instead): the batch tensor-core GEMV in one wave
# of CTAs that walk the tiles (the activations' fragments built once a CTA, 8 a batch) against a CTA a tile
# (FT_GEMV_NVFP4_BATCH_WAVE=0) -- its tests, kernel times (ft-bench-gemv-cuda --batch), and the GPU batch runner's
# steps (ft-bench-batch, Llama-8B, prompt 32, alternating, 2 rounds); ft generate with and without the warm-up.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session54/call2.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
source bench/session53/h200_or.sh
R=/tmp/res54b
source bench/device_common.sh
source bench/session53/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4
log "tests: batch kernel, lanes, batch sessions"
gpu_tests 200 'CudaGemvBatch.*:CudaNvfp4Lanes.*:GpuNvfp4Batch.*:GpuNvfp4Lanes.*:*GpuBatch*'
for wave in 1 0; do
  log "ft-bench-gemv-cuda --batch FT_GEMV_NVFP4_BATCH_WAVE=$wave"
  FT_GEMV_NVFP4_BATCH_WAVE=$wave timeout 120 "$B/ft-bench-gemv-cuda" --batch > "$R/gemv_batch_$wave.txt" 2>&1
  grep -E "HBM|^\| batch" "$R/gemv_batch_$wave.txt"
done
models_wait
# The warm-up (Runner::warmup): the first prompt's and step's one-time costs at load, not in the first request.
for w in on off; do
  for prompt in 1,2,3,4,5,6,7,8 $(seq -s, 1 40); do
    flag=; [ $w = off ] && flag=--no-warmup
    CUDA_MODULE_LOADING=EAGER timeout 60 "$B/ft" generate --model "$L" --device cuda --prompt-tokens "$prompt" \
      --max-tokens 32 --temperature 0 --ignore-eos --json $flag > "$R/gen_${w}_${#prompt}.json" 2> "$R/gen_${w}_${#prompt}.err"
    log "warm-up $w, $(echo $prompt | tr , '\n' | wc -l) prompt tokens: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['timings'])" "$R/gen_${w}_${#prompt}.json" 2>&1 | tail -1)"
    grep -h "warm-up" "$R/gen_${w}_${#prompt}.err"
  done
done
for round in 1 2; do
  for wave in 1 0; do
    budget 400 "round $round wave $wave" || break
    bb "wave${wave}_$round" 32 FT_GEMV_NVFP4_BATCH_WAVE=$wave
  done
done
finish res54b
