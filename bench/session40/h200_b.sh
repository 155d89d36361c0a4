#!/usr/bin/env bash
# Session 40's last call (the device budget left no room for bench/h200_final.sh's ~560 s after two refused starts):
# wo's norm CTA (FT_NORM_CTA=1) -- its GPU tests first, its greedy tokens and Llama-8B tg128 alternating against
# the default, then issue 3's ft rows (both models; Llama-8B also with the norm CTA). The tarball is refreshed after
# each phase. Left out for time: test_cuda whole (call 2 ran it on this session's GPU code before the norm CTA,
# 316/316) and llama.cpp (call 2's rows are this session's).
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda   (with .devcarry/llama-src.tar.xz)
#   run(command="timeout -s KILL 240 bash bench/session40/h200_b.sh; tar czf $OUT/resb.tgz -C /tmp resb",
#       carry=[".devcarry/pack"])
R=/tmp/resb
source bench/device_common.sh
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
log "test_cuda (the changed suites)"
gpu_tests 120 'CudaNormCta.*:CudaNormFold.*:GpuNvfp4Tiled.*:CudaNvfp4Tiled.*'
cp "$R/test.txt" "$R/test_changed.txt"
models_wait
finish resb
tokens_under "FT_NORM_CTA=1" "$L"
AB_BUDGET=200 ab_envs 5 "$L" - "FT_NORM_CTA=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
finish resb
ft_bench_each 210 100 "-p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562" $L $Q
log "ft bench FT_NORM_CTA=1 $(basename "$L")"
FT_NORM_CTA=1 timeout 100 "$B/ft" bench -m "$L" --device cuda -p 512 -n 128 -d 0,4096,16384 -r 2 --bw-gbs 4562 \
  2>>"$R/ft.err" | rows | sed 's/ | cuda (NVIDIA[^|]*//' | tee -a "$R/ft.md"
finish resb
