#!/usr/bin/env python3
"""Each setting's mean and standard deviation over an A/B's rounds, then the best setting.

Input: "SETTING t/s" lines, one a run, as bench/device_common.sh's ab_values (ab_VAR.txt) and ab_envs
(abe_MODEL.txt) write them. Prints one line a setting in first-seen order, then "BEST s": the fastest setting if
its mean beats the first listed (the baseline) by more than 0.2%, else the baseline. Each other setting also gets a
"paired" line: its round-by-round difference from the baseline of its test (a "@pp512" suffix names one) (round i = the i-th value of each; ab_envs alternates
the settings inside a round, so a drift over the call cancels), the mean difference, its standard error and t = mean
/ se. Session 46: eagerly loaded rounds scatter by sd ~3.5 tok/s, so |t| < 2 is not a result.
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
    # Settings pair only within one test: "S@pp512" against the first-seen "B@pp512", plain "S" (tg128) against the
    # first-seen plain one (session 50: pairing across tests compared tg128 with pp512).
    def test_of(k):
        return k.split('@', 1)[1] if '@' in k else ''
    bases = collections.OrderedDict()
    for k in d:
        bases.setdefault(test_of(k), k)
    for k, v in d.items():
        base = bases[test_of(k)]
        n = min(len(v), len(d[base]))
        if k == base or n < 2:
            continue
        diff = [v[i] - d[base][i] for i in range(n)]
        md, se = statistics.mean(diff), statistics.stdev(diff) / n ** 0.5
        rel = 100.0 * md / statistics.mean(d[base][:n])
        t = md / se if se > 0 else float('inf') * (1 if md >= 0 else -1)
        print(f'paired {k} - {base} : {md:+.2f} ({rel:+.2f}%) se {se:.2f} t {t:+.1f} over {n}', file=out)
    for test, base in bases.items():
        group = {k: m[k] for k in m if test_of(k) == test}
        best = max(group, key=group.get) if group else base
        print('BEST', best if group.get(best, 0) > group.get(base, 0) * 1.002 else base, file=out)


def self_test():
    import io
    buf = io.StringIO()
    report(means(['a 100', 'b 101', 'a 102', 'b 103', 'junk', 'c x']), buf)
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith('value a : mean 101.00 sd 1.41 over 2'), lines
    assert lines[1].startswith('value b : mean 102.00 sd 1.41 over 2'), lines
    assert lines[2] == 'paired b - a : +1.00 (+0.99%) se 0.00 t +inf over 2', lines
    assert lines[-1] == 'BEST b', lines
    buf = io.StringIO()
    report(means(['a 100', 'b 103', 'a 104', 'b 105', 'a 102', 'b 102']), buf)
    assert buf.getvalue().splitlines()[2] == 'paired b - a : +1.33 (+1.31%) se 0.88 t +1.5 over 3', buf.getvalue()
    buf = io.StringIO()
    report(means(['a 100', 'b 100.1']), buf)
    assert buf.getvalue().splitlines()[-1] == 'BEST a', buf.getvalue()  # within 0.2%: the baseline
    buf = io.StringIO()  # two tests: each paired within its own
    report(means(['a@pp512 1000', 'a 100', 'b@pp512 990', 'b 102', 'a@pp512 1010', 'a 101', 'b@pp512 1000', 'b 103']),
           buf)
    lines = buf.getvalue().splitlines()
    assert 'paired b@pp512 - a@pp512 : -10.00 (-1.00%) se 0.00 t -inf over 2' in lines, lines
    assert 'paired b - a : +2.00 (+1.99%) se 0.00 t +inf over 2' in lines, lines
    assert lines[-2:] == ['BEST a@pp512', 'BEST b'], lines
    print('ab_means self-test: ok')


if __name__ == '__main__':
    if len(sys.argv) < 2 or sys.argv[1] == '--self-test':
        self_test()
    else:
        with open(sys.argv[1]) as f:
            report(means(f))
