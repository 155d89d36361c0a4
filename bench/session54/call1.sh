#!/usr/bin/env bash
# Session 54 call 1 (~400 s, any GPU; on an H200 session 51's h200.sh instead): session 53's review mends (solo head
# through kLast, graph lookup helper, workspace only when on) on a GPU for the first time -- test_cuda (all), the batch
# runner's rows on Llama-8B (prompt 32, 2048), then on Qwen3-30B-A3B (session 53's call 7: prompt 32, solo on / off).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session54/call1.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
source bench/session53/h200_or.sh
R=/tmp/res54a
source bench/device_common.sh
source bench/session53/common.sh
log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda (all)"
gpu_tests_until 215
grep -E "Failure|FAILED" "$R/test_all.txt" | head -20
while [ ! -f "$M/llama8b-nvfp4.info" ] || ! grep -q bytes_per_token "$M/llama8b-nvfp4.info"; do sleep 2; done
for prompt in 32 2048; do bb main "$prompt"; done
models_wait
L=$Q  # bb runs on $L
budget 420 "qwen solo" && bb qsolo 32 FT_BATCH_SOLO=1
budget 480 "qwen nosolo" && bb qnosolo 32 FT_BATCH_SOLO=0
finish res54a
