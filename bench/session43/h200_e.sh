#!/usr/bin/env bash
# Session 43, call 5: the tensor-core GEMV's activation fragments as {x} alone -- both mma chains (positive and
# negative magnitudes) on B = x, the row sums cp - cn -- instead of {x, -x} (half the x_frag shared memory, 8 B
# fragments, LDS.64; gate|up's instance 64 -> 58 registers), against main's binary (ft_base, 1665d24). Same bits by
# construction (exact int32 sums): the greedy tokens of both models against ft_base's. (A third binary, the 4-warp
# instances bounded to 9 blocks an SM, did not fit the 64 MiB carry beside the tree and two others.)
#   cp build-cuda/ft /tmp/ft_base (1665d24); the change; build;
#   PACK_EXTRA="/tmp/ft_base" PACK_ONLY="ft ft-bigmodel" scripts/pack-device.sh build-cuda (no llama-src)
#   run(command="timeout -s KILL 300 bash bench/session43/h200_e.sh; tar czf $OUT/rese.tgz -C /tmp rese",
#       carry=[".devcarry/pack"], kind="nvidia-h200")
R=/tmp/rese
source bench/device_common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee -a "$R/log.txt"
models_bg llama8b-nvfp4 qwen3moe-30b-nvfp4
models_wait
for f in "$L" "$Q"; do tokens_under "FTBIN=ft_base" "$f"; done
AB_BUDGET=200 ab_envs 6 "$L" "FTBIN=ft_base" "-" -- -p 0 -n 128 -r 2 --bw-gbs 4562
python3 - "$R/ft.md" <<'PY' | tee -a "$R/log.txt"
import re, sys, statistics
names = ["ft_base (main)", "x only"]
v = [float(re.search(r'\|\s*tg128\s*\|\s*([0-9.]+)', l).group(1)) for l in open(sys.argv[1]) if 'tg128' in l]
for i, n in enumerate(names):
    xs = v[i::2]
    if xs: print(n, 'mean %.2f' % statistics.mean(xs), ' '.join('%.2f' % x for x in xs))
PY
: > "$R/ftq.md"
AB_BUDGET=260 ab_envs 3 "$Q" "FTBIN=ft_base" "-" -- -p 0 -n 128 -r 2 --bw-gbs 4562
grep qwen "$R/ft.md" | tee -a "$R/log.txt"
finish rese
