#!/usr/bin/env bash
# qwen35moe on the H200: writes the Qwen3.6-35B-A3B-shaped NVFP4 file (ft-bigmodel preset
# qwen36-35b-a3b-nvfp4: experts, shared experts and output NVFP4, attention and Gated DeltaNet
# projections BF16), then `ft bench` on it, fused and offload with a quarter of the experts
# cached (tg128, pp2048, pp8192), and llama-bench on the same file when LLAMA_BENCH names a
# binary (llama.cpp's CUDA build).
#   B=<folder with ft, ft-bigmodel> [M=/tmp/ft-models] [LLAMA_BENCH=...] bash bench/h200_qwen35.sh
# Roofline: ft-bigmodel's bytes_per_token (every weight a decode token reads, experts n_used /
# n_expert) plus the recurrent state each token reads and writes (30 Gated DeltaNet layers x 32
# heads x 128 x 128 fp32, twice), at --bw-gbs 4562.
set -uo pipefail
. "$(dirname "$0")/bigmodel_common.sh"
bigmodel_file qwen36-35b-a3b-nvfp4 qwen36-35b-a3b
STATE=$((30 * 32 * 128 * 128 * 4 * 2))
log "ft bench fused"
ft_bench qwen35_fused "$STATE" -p 2048,8192 -n 128
log "ft bench offload 0.25"
ft_bench qwen35_offload "$STATE" --moe-backend offload --moe-cache-rate 0.25 -p 2048,8192 -n 128
llama_bench -p 2048,8192 -n 128
log done
