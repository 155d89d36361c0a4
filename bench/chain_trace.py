#!/usr/bin/env python3
"""Where a decode step's time goes, launch by launch, from a chain trace (cuda/chain_trace.h: a build
with -DFT_CHAIN_TRACE=ON, `FT_CHAIN_TRACE=PREFIX ft bench -m F --device cuda -p 0 -n 128 -r 1` writes
PREFIX.tg128.csv: one row a launch, block 0's %globaltimer before and after its PDL wait).

Kernel i's wait returns when kernel i - 1 has completed, so span(i - 1) = wait(i) - wait(i - 1) is
kernel i - 1's time from its own release to its completion -- its share of the step's critical path,
PDL overlap included -- and early(i) = wait(i) - start(i) how long block 0 sat parked before that
(0 when it arrived after its predecessor had finished: a launch gap). The step is split into its
repeating layer (the period of the grid x block signatures) and the launches before and after; per
position in the layer the median span and early over all layers and steps.
  bench/chain_trace.py PREFIX.tg128.csv --steps 128 [--period P]
  bench/chain_trace.py --self-test
"""
import argparse
import csv
import io
import statistics
import sys


def load(f):
    rows = list(csv.DictReader(f))
    return [(int(r['grid']), int(r['block']), int(r['t_start_ns']), int(r['t_wait_ns'])) for r in rows]


def find_period(sigs, lo=2, hi=40):
    """The smallest period under which >= 95% of the middle signatures repeat."""
    n = len(sigs)
    a, b = n // 5, 4 * n // 5
    for p in range(lo, hi + 1):
        if b - a <= p:
            break
        same = sum(1 for i in range(a, b - p) if sigs[i] == sigs[i + p])
        if same >= 0.95 * (b - a - p):
            return p
    return None


def layer_run(sigs, p):
    """(start, count): the run of identical p-launch blocks that repeats most often, earliest first."""
    best = (0, 1)
    for i in range(min(len(sigs), 4 * p)):
        k = 1
        while i + (k + 1) * p <= len(sigs) and sigs[i + (k - 1) * p:i + k * p] == sigs[i + k * p:i + (k + 1) * p]:
            k += 1
        if k > best[1]:
            best = (i, k)
    return best


def analyse(recs, steps, period=None):
    if steps < 1 or len(recs) % steps != 0:
        raise SystemExit(f'{len(recs)} launches do not split into {steps} steps')
    per = len(recs) // steps
    span = [recs[i + 1][3] - recs[i][3] for i in range(len(recs) - 1)] + [None]
    early = [r[3] - r[2] for r in recs]
    sigs = [(r[0], r[1]) for r in recs[:per]]
    p = period or find_period(sigs)
    if p is None:
        raise SystemExit('no repeating layer found; pass --period')
    start, n_layers = layer_run(sigs, p)
    tail0 = start + n_layers * p
    out = {'per_step': per, 'period': p, 'prefix': start, 'layers': n_layers, 'suffix': per - tail0}
    pos = []
    for k in range(p):
        s = [span[st * per + start + l * p + k] for st in range(steps) for l in range(n_layers)
             if span[st * per + start + l * p + k] is not None]
        e = [early[st * per + start + l * p + k] for st in range(steps) for l in range(n_layers)]
        pos.append((sigs[start + k], statistics.median(s) / 1e3, statistics.median(e) / 1e3))
    out['positions'] = pos
    def part(idx):
        vals = [span[st * per + i] for st in range(steps) for i in idx if span[st * per + i] is not None]
        return sum(vals) / steps / 1e3
    out['prefix_us'] = part(range(0, start))
    out['suffix_us'] = part(range(tail0, per))
    out['layer_us'] = sum(x[1] for x in pos)
    steps_us = [(recs[(st + 1) * per][3] - recs[st * per][3]) / 1e3 for st in range(steps - 1)]
    out['step_us'] = statistics.median(steps_us) if steps_us else None
    return out


def report(out):
    print(f"{out['per_step']} launches a step: {out['prefix']} before the layers, {out['layers']} layers of "
          f"{out['period']}, {out['suffix']} after; step {out['step_us']:.1f} us (median)")
    print('| position | grid x block | span us (median) | early us (median) |')
    print('|---|---|---|---|')
    for k, (sig, s, e) in enumerate(out['positions']):
        print(f'| {k} | {sig[0]} x {sig[1]} | {s:.2f} | {e:.2f} |')
    print(f"layer {out['layer_us']:.2f} us x {out['layers']}; before {out['prefix_us']:.1f} us, after "
          f"{out['suffix_us']:.1f} us a step")


def self_test():
    # 3 steps: an embed launch, 4 layers of (A 2 us, B 5 us, C 1 us), a head launch of 10 us.
    recs, t = [], 0
    layer = [((10, 256), 2000), ((132, 128), 5000), ((1, 256), 1000)]
    for st in range(3):
        for sig, dur in [((1, 128), 3000)] + layer * 4 + [((500, 256), 10000)]:
            recs.append((sig[0], sig[1], t - 700, t))
            t += dur
    text = 'seq,grid,block,t_start_ns,t_wait_ns\n' + ''.join(
        f'{i},{g},{b},{s},{w}\n' for i, (g, b, s, w) in enumerate(recs))
    out = analyse(load(io.StringIO(text)), 3)
    assert out['period'] == 3 and out['layers'] == 4 and out['prefix'] == 1 and out['suffix'] == 1, out
    assert [round(x[1], 2) for x in out['positions']] == [2.0, 5.0, 1.0], out['positions']
    assert abs(out['layer_us'] - 8.0) < 1e-9 and abs(out['step_us'] - 45.0) < 1e-9, out
    assert all(abs(x[2] - 0.7) < 1e-9 for x in out['positions'])
    print('self-test passed')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('csv', nargs='?')
    ap.add_argument('--steps', type=int, default=128)
    ap.add_argument('--period', type=int)
    ap.add_argument('--self-test', action='store_true')
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.csv:
        ap.error('a trace file, or --self-test')
    with open(a.csv) as f:
        report(analyse(load(f), a.steps, a.period))


if __name__ == '__main__':
    sys.exit(main())
