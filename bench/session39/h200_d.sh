#!/usr/bin/env bash
# Session 39 call 6: where the step flow's 5% goes (calls 1-5; the chain trace of call 5 put gate|up + down at
# 40.4 us a layer against 36.4). Llama-8B tg128 alternating, 2 rounds: the default; the flow; the producer's
# tile order alone (FT_GEMV_FLOW_OPT=1: no counts, the down projection without the flow); the flow with
# fence.acq_rel (2), with no fence (4: the loads ordered by the counts' data dependence only), with 32 ns polls (8).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda   (llama-src moved out of the pack)
#   run(command="timeout -s KILL 300 bash bench/session39/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"])
R=/tmp/resd
source bench/device_common.sh
models_bg llama8b-nvfp4
log "test_cuda (flow)"
gpu_tests 100 "CudaGemvFlow.*"
models_wait
tokens_under "FT_GEMV_FLOW=1 FT_GEMV_FLOW_OPT=4" "$L"
tokens_under "FT_GEMV_FLOW=1 FT_GEMV_FLOW_OPT=1" "$L"
AB_BUDGET=250 ab_envs 2 "$L" - "FT_GEMV_FLOW=1" "FT_GEMV_FLOW=1 FT_GEMV_FLOW_OPT=1" "FT_GEMV_FLOW=1 FT_GEMV_FLOW_OPT=2" \
  "FT_GEMV_FLOW=1 FT_GEMV_FLOW_OPT=4" "FT_GEMV_FLOW=1 FT_GEMV_FLOW_OPT=8" -- -p 0 -n 128 -r 2 --bw-gbs 4562
finish resd
