#!/usr/bin/env bash
# Prepared for the next call that gets an H200 (not run in session 43: every call came back on an H100). Main's chain
# trace there -- as is, without the FFN norm, without the attention, without both (FT_DEBUG_SKIP: garbage tokens,
# times only), L2 ahead off -- the L2-ahead sizes, the qkv launch's 3 stages against 2 (kNvfp4AfterGemvStages,
# measured on H100s only), Qwen3-30B-A3B's trace, ncu of one decode step's launches. Binaries of a
# -DFT_CHAIN_TRACE=ON build (the trace costs nothing measurable, session 23):
#   cmake -S . -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DFT_CUDA=ON -DFT_CHAIN_TRACE=ON
#   cmake --build build-trace -j2 --target ft ft-bigmodel
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-trace
#   run(command="timeout -s KILL 540 bash bench/session43/h200_next.sh; tar czf $OUT/resn.tgz -C /tmp resn",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resn
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
S2="FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,2,57344"
tokens_under "$S2" "$L"
ab_envs 1 "$L" "FT_CHAIN_TRACE=$R/base" "FT_CHAIN_TRACE=$R/k2 FT_DEBUG_SKIP=norm2" \
  "FT_CHAIN_TRACE=$R/ka FT_DEBUG_SKIP=attn" "FT_CHAIN_TRACE=$R/k2a FT_DEBUG_SKIP=attn,norm2" \
  "FT_CHAIN_TRACE=$R/off FT_FFN_L2_AHEAD=0" -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
ab_values FT_FFN_L2_AHEAD "8 0 16 24" 3 250 "$L" -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=330 ab_envs 4 "$L" "-" "$S2" -- -p 0 -n 128 -r 2 --bw-gbs 4562
python3 - "$R/ft.md" <<'PY' | tee -a "$R/log.txt"
import re, sys, statistics
rows = [l for l in open(sys.argv[1]) if re.search(r'\|\s*tg128\s*\|', l)][-8:]  # the stages A/B's rows
v = [float(re.search(r'\|\s*tg128\s*\|\s*([0-9.]+)', l).group(1)) for l in rows]
for i, n in enumerate(["qkv 3 stages (default)", "qkv 2 stages"]):
    xs = v[i::2]
    if xs: print(n, 'mean %.2f' % statistics.mean(xs), ' '.join('%.2f' % x for x in xs))
PY
AB_BUDGET=370 ab_envs 1 "$Q" "FT_CHAIN_TRACE=$R/qbase" "-" -- -p 0 -n 128 -r 1 --ctx-size 4096 --bw-gbs 4562
chain_sums base k2 ka k2a off qbase
budget 400 ncu && ncu_sass 'nvfp4_mma_kernel|attn|lean_slab|rmsnorm' 200 12
log "ft rows:"; cat "$R/ft.md"
finish resn
