#!/usr/bin/env bash
# Session 47, call 1: the FFN norm made by wo's last CTA (FT_NORM_CTA=1: every CTA of the lean dense wo launch takes a
# ticket, the last makes rmsnorm_q8's bytes; no launch of its own, nothing polls). Its tests (bit for bit against the
# product + rmsnorm_q8, the session's logits against the norm launch's), the 64 greedy tokens, then Llama-8B tg128
# alternating with main's default (the norm's own launch), kernels loaded eagerly.
#   PACK_ONLY="ft test_cuda ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 560 bash bench/session47/call1.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/res1
source bench/device_common.sh
gpu_preamble 120 'CudaNormCta.*:CudaNormFold.*:GpuNvfp4Tiled.*:CudaNvfp4Tiled.AfterGemvLaunchEqualsThePlainOne:CudaGemvLean*' llama8b-nvfp4
grep -E "NORM-CTA" "$R/test.txt" | head -4
tokens_under "FT_NORM_CTA=1" "$L"
AB_BUDGET=480 ab_envs 12 "$L" "-" "FT_NORM_CTA=1" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
log "ft rows:"; cat "$R/ft.md"
finish res1
