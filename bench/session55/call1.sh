#!/usr/bin/env bash
# Session 55 call 1 (~420 s, any GPU). On an H200: bench/session55/h200.sh. Elsewhere: test_cuda (all), the lanes rule on this GPU (the load
# log's "lane-major" line, default and FT_NVFP4_LANES=1), ft serve's single warm-up (session 54's mend, never run on a
# GPU): the server log must show one warm-up, of the batch runner, and a request must answer.
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session55/call1.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ $GPU == *H200* ]]; then exec bash bench/session55/h200.sh; fi
R=/tmp/res55a
source bench/device_common.sh
source bench/session55/common.sh
log "GPU: $GPU"
models_bg llama8b-nvfp4
log "test_cuda (all)"
gpu_tests_until 240
grep -E "Failure|FAILED" "$R/test_all.txt" | head -20
models_wait
for e in "" "FT_NVFP4_LANES=1"; do
  log "generate ${e:-default}"
  env $e timeout 60 "$B/ft" generate --model "$L" --device cuda --prompt-tokens 1,2,3 --max-tokens 16 \
    --temperature 0 > "$R/gen_${e:-default}.txt" 2>&1
  grep -E "lane-major|warm-up" "$R/gen_${e:-default}.txt" | cut -c1-160 | tee -a "$R/log.txt"
  tail -2 "$R/gen_${e:-default}.txt" | cut -c1-200 | tee -a "$R/log.txt"
done
serve_check
finish res55a
