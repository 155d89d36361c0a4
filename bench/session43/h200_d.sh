#!/usr/bin/env bash
# Session 43, call 4 (call 3's pack, main of 1665d24): the qkv launch's floor at 3 stages -- 56 KB (4 CTAs an SM,
# the default) against 72 KB (3 an SM) -- and 4 stages at 72 KB; Llama-8B tg128, 6 rounds alternating.
#   run(command="timeout -s KILL 200 bash bench/session43/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resd
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4
models_wait
F3="FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,3,73728"
F4="FT_GEMV_NVFP4_TILED_PLAN=6144x4096=4,4,73728"
tokens_under "$F4" "$L"
AB_BUDGET=180 ab_envs 6 "$L" "-" "$F3" "$F4" -- -p 0 -n 128 -r 2 --bw-gbs 4562
python3 - "$R/ft.md" <<'PY' | tee -a "$R/log.txt"
import re, sys, statistics
names = ["default (4,3 at 56 KB)", "4,3 at 72 KB", "4,4 at 72 KB"]
v = [float(re.search(r'\|\s*tg128\s*\|\s*([0-9.]+)', l).group(1)) for l in open(sys.argv[1]) if 'tg128' in l]
for i, n in enumerate(names):
    xs = v[i::3]
    if xs: print(n, 'mean %.2f' % statistics.mean(xs), ' '.join('%.2f' % x for x in xs))
PY
finish resd
