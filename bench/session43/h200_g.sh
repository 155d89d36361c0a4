#!/usr/bin/env bash
# Session 43, call 7: the bulk-copy tensor-core GEMV (gemv_mma_tma.cu: Qwen3-30B-A3B's qkv) alone on {x}-only
# fragments (MmaFrag<true>; gemv_mma.cu's 42 kernels keep their PTX, bench/ptx_same.py), against main's binary
# (ft_base, 1665d24): the greedy tokens of both models, Qwen3-30B-A3B and Llama-8B tg128 alternating.
#   PACK_EXTRA="/tmp/ft_base" PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-cuda (no llama-src)
#   run(command="timeout -s KILL 240 bash bench/session43/h200_g.sh; tar czf $OUT/resg.tgz -C /tmp resg",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resg
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
for f in "$Q" "$L"; do tokens_under "FTBIN=ft_base" "$f"; done
AB_BUDGET=170 ab_envs 5 "$Q" "FTBIN=ft_base" "-" -- -p 0 -n 128 -r 2 --bw-gbs 4562
AB_BUDGET=215 ab_envs 3 "$L" "FTBIN=ft_base" "-" -- -p 0 -n 128 -r 2 --bw-gbs 4562
python3 - "$R/ft.md" <<'PY' | tee -a "$R/log.txt"
import re, sys, statistics
for model in ("qwen3moe", "llama8b"):
    v = [float(re.search(r'\|\s*tg128\s*\|\s*([0-9.]+)', l).group(1)) for l in open(sys.argv[1]) if 'tg128' in l and model in l]
    for i, n in enumerate(["ft_base (main)", "tma on x only"]):
        xs = v[i::2]
        if xs: print(model, n, 'mean %.2f' % statistics.mean(xs), ' '.join('%.2f' % x for x in xs))
PY
finish resg
