#!/usr/bin/env bash
# Session 53, first call, whatever card comes: on an H200, session 51's h200.sh (issue 3's table beside llama.cpp's
# CUDA build, the 80% GEMV criterion, lanes A/B -- never measured on an H200); on anything else session 52's call2.sh
# (the batch GEMV's forced-stage tests, stage sweep, GPU batch runner tokens/s on/off).
#   PACK_ONLY="ft test_cuda ft-bigmodel ft-bench-gemv-cuda ft-bench-batch" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 470 bash bench/session53/call.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
source bench/session53/h200_or.sh
exec bash bench/session52/call2.sh
