#!/usr/bin/env bash
# Session 42, call 3: the L2-ahead size near call 2's best (8 MB of 0 / 8 / 16 / 24 / 32 on an H100): 0 / 4 / 8 / 12 MB
# alternating, 4 rounds, Llama-8B tg128 (binaries of call 2).
#   run(command="timeout -s KILL 200 bash bench/session42/h200_d.sh; tar czf $OUT/resd.tgz -C /tmp resd",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/resd
source bench/device_common.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$R/log.txt"
models_bg llama8b-nvfp4
models_wait
for round in 1 2 3 4; do
  for mb in 0 4 8 12; do
    budget 170 "ahead $mb round $round" || break 2
    t=$(FT_FFN_L2_AHEAD=$mb timeout 40 "$B/ft" bench -m "$L" --device cuda -p 0 -n 128 -r 2 --bw-gbs 4562 2>>"$R/ft.err" |
        rows | tee -a "$R/ft.md" | awk -F'|' '{for (i = 1; i <= NF; i++) if ($i ~ /±/) {print $i; exit}}' | awk '{print $1}')
    echo "$mb $t" | tee -a "$R/ab.txt"
  done
done
python3 -c "
import collections, statistics
d = collections.defaultdict(list)
for l in open('$R/ab.txt'):
    p = l.split()
    if len(p) == 2:
        try: d[int(p[0])].append(float(p[1]))
        except ValueError: pass
for k in sorted(d): print('ahead', k, 'MB: mean %.2f over %d' % (statistics.mean(d[k]), len(d[k])), ' '.join('%.2f' % x for x in d[k]))
" | tee -a "$R/log.txt"
finish resd
