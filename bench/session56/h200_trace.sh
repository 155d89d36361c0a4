#!/usr/bin/env bash
# Session 56, after h200.sh on the same warm H200 (~200 s): where an H200 Llama-8B layer goes now -- the chain trace
# (session 43's H100 table, never taken on the H200 with lanes) as is, without the FFN norm, without the attention,
# without both (FT_DEBUG_SKIP: garbage tokens, times only); Qwen3-30B-A3B as is.
# ft_trace: a -DFT_CHAIN_TRACE=ON build's ft (the trace costs nothing measurable, session 23), packed beside ft:
#   cmake -S . -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DFT_CUDA=ON -DFT_CHAIN_TRACE=ON
#   cmake --build build-trace -j2 --target ft
#   mkdir -p .devcarry/pack2/bin && cp build-trace/ft .devcarry/pack2/bin/ft_trace && strip .devcarry/pack2/bin/ft_trace
#   (cd .devcarry/pack2 && tar cf - bin | xz -T1 -9 > ft_trace.tar.xz && rm -rf bin)
# Carried alone (with the main pack it passes the 64 MiB carry limit: the trace build's kernels differ), on the
# machine that still holds the main pack of the call before (an uncarried ignored path is kept while it is warm):
#   run(command="timeout -s KILL 300 bash bench/session56/h200_trace.sh", carry=[".devcarry/pack2"], kind="nvidia-h200")
R=/tmp/res56t
source bench/device_common.sh
[ -f .devcarry/pack/bin.tar.xz ] || { log "no main pack here (a fresh machine): nothing run"; finish res56t; exit 1; }
tar xJf .devcarry/pack2/ft_trace.tar.xz -C .devcarry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
AB_BUDGET=230 ab_envs 1 "$L" "FTBIN=ft_trace FT_CHAIN_TRACE=$R/base" "FTBIN=ft_trace FT_CHAIN_TRACE=$R/k2 FT_DEBUG_SKIP=norm2" \
  "FTBIN=ft_trace FT_CHAIN_TRACE=$R/ka FT_DEBUG_SKIP=attn" "FTBIN=ft_trace FT_CHAIN_TRACE=$R/k2a FT_DEBUG_SKIP=attn,norm2" \
  -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
AB_BUDGET=260 ab_envs 1 "$Q" "FTBIN=ft_trace FT_CHAIN_TRACE=$R/qbase" -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
chain_sums base k2 ka k2a qbase
log "ft rows:"; cat "$R/ft.md"
finish res56t
