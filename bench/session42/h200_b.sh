#!/usr/bin/env bash
# Session 42, the one call the device allowed after four refused starts (h200_a.sh, the chain trace, did not run):
# the FFN norm streaming the head of gate|up into L2 (FT_FFN_L2_AHEAD=MB, off by default), measured, then issue 3's
# figures with the best setting beside llama.cpp v0.5.0's CUDA llama-bench built in the same call. Binaries of
# build-cuda (main 893b873's code):
#   scripts/setup-oracle.sh; scripts/pack-llama-src.sh; PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 575 bash bench/session42/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resb
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
llama_build_bg
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda CudaOpsNorm.*"
gpu_tests 60 'CudaOpsNorm.*'
models_wait
tokens_under "FT_FFN_L2_AHEAD=24" "$L"
tokens_under "FT_FFN_L2_AHEAD=40" "$L"
# Llama-8B tg128, rounds alternating over the sizes (run as written then; ab_values since).
ab_values FT_FFN_L2_AHEAD "0 16 24 32 40" 3 250 "$L" -p 0 -n 128 -r 2 --bw-gbs 4562
best=$(awk '/^BEST/{b = $2} END {print b}' "$R/log.txt")
log "best ahead: ${best:-0} MB"
llama_wait 420
log "ft final rows (FT_FFN_L2_AHEAD=${best:-0} for Llama-8B; the MoE model has no dense FFN)"
export FT_FFN_L2_AHEAD=${best:-0}
ft_bench_each 470 90 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L
unset FT_FFN_L2_AHEAD
ft_bench_each 480 60 "-p 512 -n 128 -r 2 --bw-gbs 4562" $Q
for f in $L $Q; do
  budget 540 "llama-bench $f" || break
  log "llama-bench $(basename "$f")"
  timeout 45 "$LB" -m "$f" -p 512 -n 128 -ngl 99 -fa 1 -r 2 -o md 2>>"$R/lb.err" | tee -a "$R/lb_raw.md" | rows |
    tee -a "$R/llama-bench.md"
done
log "ft rows:"; cat "$R/ft.md"
finish resb
