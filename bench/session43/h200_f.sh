#!/usr/bin/env bash
# Session 43, call 6: wo's L2 ahead issued after a short sleep (FT_FFN_L2_DELAY=ns, thread 0 of each wo CTA,
# __nanosleep before its prefetches) -- call 1's trace had the attention span 6.02 -> 7.33 us with the ahead on
# (its loads right after its PDL wait meet the prefetch flood, which starts as wo's CTAs do) -- at 8 and 16 MB.
#   PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-cuda
#   run(command="timeout -s KILL 240 bash bench/session43/h200_f.sh; tar czf $OUT/resf.tgz -C /tmp resf",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resf
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4
models_wait
tokens_under "FT_FFN_L2_DELAY=2000" "$L"
AB_BUDGET=220 ab_envs 5 "$L" "-" "FT_FFN_L2_DELAY=1000" "FT_FFN_L2_DELAY=2000" "FT_FFN_L2_DELAY=1000 FT_FFN_L2_AHEAD=16" \
  -- -p 0 -n 128 -r 2 --bw-gbs 4562
python3 - "$R/ft.md" <<'PY' | tee -a "$R/log.txt"
import re, sys, statistics
names = ["default (8 MB, no delay)", "delay 1000 ns", "delay 2000 ns", "delay 1000 ns, 16 MB"]
v = [float(re.search(r'\|\s*tg128\s*\|\s*([0-9.]+)', l).group(1)) for l in open(sys.argv[1]) if 'tg128' in l]
for i, n in enumerate(names):
    xs = v[i::4]
    if xs: print(n, 'mean %.2f' % statistics.mean(xs), ' '.join('%.2f' % x for x in xs))
PY
finish resf
