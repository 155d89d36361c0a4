#!/usr/bin/env python3
"""Each setting's mean and standard deviation over an A/B's rounds, then the best setting.

Input: "SETTING t/s" lines, one a run, as bench/device_common.sh's ab_values (ab_VAR.txt) and ab_envs
(abe_MODEL.txt) write them. Prints one line a setting in first-seen order, then "BEST s": the fastest setting if
its mean beats the first listed (the baseline) by more than 0.2%, else the baseline.
  bench/ab_means.py FILE
  bench/ab_means.py --self-test
"""
import collections
import statistics
import sys


def means(lines):
    d = collections.OrderedDict()
    for line in lines:
        p = line.split()
        if len(p) != 2:
            continue
        try:
            v = float(p[1])
        except ValueError:
            continue
        d.setdefault(p[0], []).append(v)
    return d


def report(d, out=sys.stdout):
    m = {k: statistics.mean(v) for k, v in d.items() if v}
    for k, v in d.items():
        sd = statistics.stdev(v) if len(v) > 1 else 0.0
        print(f'value {k} : mean {m[k]:.2f} sd {sd:.2f} over {len(v)}', ' '.join(f'{x:.2f}' for x in v), file=out)
    base = next(iter(d), '0')
    best = max(m, key=m.get) if m else base
    print('BEST', best if m.get(best, 0) > m.get(base, 0) * 1.002 else base, file=out)


def self_test():
    import io
    buf = io.StringIO()
    report(means(['a 100', 'b 101', 'a 102', 'b 103', 'junk', 'c x']), buf)
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith('value a : mean 101.00 sd 1.41 over 2'), lines
    assert lines[1].startswith('value b : mean 102.00 sd 1.41 over 2'), lines
    assert lines[-1] == 'BEST b', lines
    buf = io.StringIO()
    report(means(['a 100', 'b 100.1']), buf)
    assert buf.getvalue().splitlines()[-1] == 'BEST a', buf.getvalue()  # within 0.2%: the baseline
    print('ab_means self-test: ok')


if __name__ == '__main__':
    if len(sys.argv) < 2 or sys.argv[1] == '--self-test':
        self_test()
    else:
        with open(sys.argv[1]) as f:
            report(means(f))
