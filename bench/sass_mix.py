#!/usr/bin/env python3
"""Instruction mix of the kernels in an ncu source export (bench/session21/h200_a.sh, h200_g.sh:
`ncu --import R.ncu-rep --page source --csv --print-source sass > sass.csv`).

For each kernel section: warp instructions executed, the top opcodes by executed count, how many of
them copy a uniform register into a vector one (`IMAD.U32 R, RZ, RZ, UR`: the E2M1 table re-created
before PRMTs, benches/h200.md session 21), and -- with --per N -- the instructions a work item where a
launch runs N items (e.g. 6144 for the Qwen3-30B-A3B gate|up pair at R 2).
  bench/sass_mix.py sass.csv [--kernel SUBSTRING] [--per N] [--top 16]
  bench/sass_mix.py --self-test
"""
import argparse
import collections
import csv
import io
import sys


def sections(text):
    lines = text.split('\n')
    starts = [i for i, l in enumerate(lines) if l.startswith('"Kernel Name"')]
    for k, st in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        name = next(csv.reader([lines[st]]))[1]
        rows = list(csv.reader(lines[st + 1:end]))
        if not rows:
            continue
        head, data = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
        yield name, head, data


def mix(head, data):
    src, ex = head.index('Source'), head.index('Instructions Executed')
    ops, total, ur_copies = collections.Counter(), 0, 0
    for r in data:
        n = int(r[ex] or 0)
        words = r[src].split()
        if not words:
            continue
        op = words[1] if words[0].startswith('@') and len(words) > 1 else words[0]
        ops[op] += n
        total += n
        if op == 'IMAD.U32' and 'RZ, RZ, UR' in r[src]:
            ur_copies += n
    return total, ops, ur_copies


def report(text, kernel=None, per=0, top=16, out=sys.stdout):
    for name, head, data in sections(text):
        if kernel and kernel not in name:
            continue
        total, ops, ur = mix(head, data)
        print(f'== {name[:150]}', file=out)
        line = f'   warp instructions {total:,}; IMAD.U32 from a uniform register {ur:,}'
        if per:
            line += f'; a work item {total / per:,.0f}'
        print(line, file=out)
        print('   ' + ', '.join(f'{op} {n:,}' for op, n in ops.most_common(top)), file=out)


def self_test():
    hdr = '"Address","Source","Instructions Executed"\n'
    text = ('"Kernel Name","void k<1>(int)",\n' + hdr + '"0x0","PRMT R1, R2, R3, R4","10"\n' +
            '"0x10","@P0 IMAD.U32 R5, RZ, RZ, UR4","6"\n' + '"0x20","EXIT","2"\n')
    buf = io.StringIO()
    report(text, per=2, out=buf)
    got = buf.getvalue()
    assert 'warp instructions 18;' in got and 'uniform register 6;' in got and 'a work item 9' in got, got
    assert 'PRMT 10, IMAD.U32 6, EXIT 2' in got, got
    print('sass_mix self-test: ok')


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('csv', nargs='?')
    ap.add_argument('--kernel')
    ap.add_argument('--per', type=int, default=0)
    ap.add_argument('--top', type=int, default=16)
    ap.add_argument('--self-test', action='store_true')
    a = ap.parse_args()
    if a.self_test or not a.csv:
        self_test()
    else:
        report(open(a.csv).read(), a.kernel, a.per, a.top)
