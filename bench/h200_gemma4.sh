#!/usr/bin/env bash
# gemma4 MoE on the H200: writes the Gemma-4-26B-A4B-shaped NVFP4 file (ft-bigmodel preset
# gemma4-26b-a4b-nvfp4: NVFP4 attention, dense MLP and split experts with per-expert scales,
# BF16 tied embeddings), then `ft bench` on it, fused and offload with half of the experts
# cached (tg128, pp512), and llama-bench -p 512 -n 128 -ngl 99 -fa 1 on the same file when
# LLAMA_BENCH names a binary (llama.cpp's CUDA build).
#   B=<folder with ft, ft-bigmodel> [M=/tmp/ft-models] [LLAMA_BENCH=...] bash bench/h200_gemma4.sh
# Roofline: ft-bigmodel's bytes_per_token (every weight a decode token reads: experts 8/128,
# one token_embd row, the tied BF16 head in full) at --bw-gbs 4562; the KV cache a token reads
# at these depths (< 1 MB) is left out.
set -uo pipefail
BENCH_TIMEOUT=${BENCH_TIMEOUT:-60}
. "$(dirname "$0")/bigmodel_common.sh"
bigmodel_file gemma4-26b-a4b-nvfp4 gemma4-26b-a4b
log "ft bench fused"
ft_bench gemma4_fused 0 -p 512 -n 128
log "ft bench offload 0.5"
ft_bench gemma4_offload 0 --moe-backend offload --moe-cache-rate 0.5 -p 512 -n 128
llama_bench -p 512 -n 128
log done
