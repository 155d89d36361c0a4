#!/usr/bin/env bash
# Session 46, call 1: test_cuda whole (session 45's prompt_chunk_decode_logits helper had not run on a GPU; main's
# weight loads now go through cuda/l2_hint.cuh, the same instructions when the option is off), then the weight
# streams with an L2 evict_first policy (ft_evict: build-evict, -DFT_CUDA_WEIGHT_EVICT_FIRST=ON) against main, both
# loaded eagerly, 10 rounds on Llama-8B and 6 on Qwen3-30B-A3B. The same 64 greedy tokens are checked first.
#   cp build-evict/ft /tmp/base/ft_evict
#   PACK_ONLY="ft test_cuda ft-bigmodel" PACK_EXTRA="/tmp/base/ft_evict" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 580 bash bench/session46/call1.sh", carry=[".devcarry/pack"], kind="nvidia-h200")
# (Ran with the preamble written out; now the same steps through device_common.sh's gpu_preamble.)
R=/tmp/res1
source bench/device_common.sh
gpu_preamble 240 "" llama8b-nvfp4 qwen3moe-30b-nvfp4
tokens_under "FTBIN=ft_evict" "$L"
tokens_under "FTBIN=ft_evict" "$Q"
AB_BUDGET=430 ab_envs 10 "$L" "-" "FTBIN=ft_evict" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$L"
AB_BUDGET=540 ab_envs 6 "$Q" "-" "FTBIN=ft_evict" -- -p 0 -n 128 -r 2 --bw-gbs 4562
ab_env_means "$Q"
log "ft rows:"; cat "$R/ft.md"
finish res1
