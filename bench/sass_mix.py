#!/usr/bin/env python3
"""Instruction mix of the kernels in an ncu source export (bench/session21/h200_a.sh, h200_g.sh:
`ncu --import R.ncu-rep --page source --csv --print-source sass > sass.csv`).

For each kernel section: warp instructions executed, the top opcodes by executed count, how many of
them copy a uniform register into a vector one (`IMAD.U32 R, RZ, RZ, UR`: the E2M1 table re-created
before PRMTs, benches/h200.md session 21), and -- with --per N -- the instructions a work item where a
launch runs N items (e.g. 6144 for the Qwen3-30B-A3B gate|up pair at R 2). --between A,B keeps the
SASS lines from the first holding A to the first after it holding B (session 22: ACQBULK,BAR.SYNC = the
routing of the gate|up launch that routes, --per 768 its routing warps) and adds the region's stall
samples by reason.
--loop OP (session 26) splits a kernel's stall samples (ncu's "Warp Stall Sampling (All Samples)" column) into the
lines before the first holding OP, from it to the last holding OP, and after (IMMA: a tensor-core GEMV's prologue,
step loop and epilogue).
  bench/sass_mix.py sass.csv [--kernel SUBSTRING] [--per N] [--top 16] [--between A,B] [--loop OP]
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


def between(head, data, a, b):
    src = head.index('Source')
    i = next((k for k, r in enumerate(data) if a in r[src]), None)
    if i is None:
        return []
    j = next((k for k in range(i + 1, len(data)) if b in data[k][src]), len(data))
    return data[i:j]


def stalls(head, data):
    cols = [(c, head.index(c)) for c in head if c.startswith('stall_') and 'Not Issued' not in c]
    sums = collections.Counter()
    for r in data:
        for c, k in cols:
            sums[c[6:]] += float(r[k] or 0)
    return sums


def loop_split(head, data, op):
    src, col = head.index('Source'), 'Warp Stall Sampling (All Samples)'
    if col not in head:
        return None
    k = head.index(col)
    at = [i for i, r in enumerate(data) if op in r[src]]
    if not at:
        return None
    n = [float(r[k] or 0) for r in data]
    return sum(n[:at[0]]), sum(n[at[0]:at[-1] + 1]), sum(n[at[-1] + 1:])


def report(text, kernel=None, per=0, top=16, out=sys.stdout, region=None, loop=None):
    for name, head, data in sections(text):
        if kernel and kernel not in name:
            continue
        if region:
            data = between(head, data, *region)
        total, ops, ur = mix(head, data)
        print(f'== {name[:150]}', file=out)
        line = f'   warp instructions {total:,}; IMAD.U32 from a uniform register {ur:,}'
        if per:
            line += f'; a work item {total / per:,.0f}'
        print(line, file=out)
        print('   ' + ', '.join(f'{op} {n:,}' for op, n in ops.most_common(top)), file=out)
        parts = loop_split(head, data, loop) if loop else None
        if parts and sum(parts):
            tot = sum(parts)
            print('   stall samples before / from first to last %s / after: ' % loop +
                  ' / '.join(f'{v:g} ({100 * v / tot:.0f}%)' for v in parts), file=out)
        st = stalls(head, data)
        if region and st:
            print('   stall samples ' + ', '.join(f'{k} {v:g}' for k, v in st.most_common(6) if v), file=out)


def self_test():
    hdr = '"Address","Source","Instructions Executed"\n'
    text = ('"Kernel Name","void k<1>(int)",\n' + hdr + '"0x0","PRMT R1, R2, R3, R4","10"\n' +
            '"0x10","@P0 IMAD.U32 R5, RZ, RZ, UR4","6"\n' + '"0x20","EXIT","2"\n')
    buf = io.StringIO()
    report(text, per=2, out=buf)
    got = buf.getvalue()
    assert 'warp instructions 18;' in got and 'uniform register 6;' in got and 'a work item 9' in got, got
    assert 'PRMT 10, IMAD.U32 6, EXIT 2' in got, got
    hdr2 = '"Address","Source","Instructions Executed","stall_wait","stall_wait (Not Issued)"\n'
    text2 = ('"Kernel Name","void k<2>(int)",\n' + hdr2 + '"0x0","LDC R1, c[0x0]","4","1","0"\n' +
             '"0x10","ACQBULK","4","2","0"\n' + '"0x20","FADD R1, R2, R3","8","3","0"\n' +
             '"0x30","BAR.SYNC 0x0","4","5","0"\n')
    buf = io.StringIO()
    report(text2, per=4, out=buf, region=('ACQBULK', 'BAR.SYNC'))
    got = buf.getvalue()
    assert 'warp instructions 12;' in got and 'a work item 3' in got and 'stall samples wait 5' in got, got
    hdr3 = '"Address","Source","Instructions Executed","Warp Stall Sampling (All Samples)"\n'
    text3 = ('"Kernel Name","void k<3>(int)",\n' + hdr3 + '"0x0","LDG R1, [R2]","4","6"\n' +
             '"0x10","IMMA.16816.S8.S8 R0, R2, R4, R0","8","1"\n' + '"0x20","PRMT R1, R2, R3, R4","8","2"\n' +
             '"0x30","IMMA.16816.S8.S8 R0, R2, R4, R0","8","1"\n' + '"0x40","EXIT","4","0"\n')
    buf = io.StringIO()
    report(text3, out=buf, loop='IMMA')
    got = buf.getvalue()
    assert 'first to last IMMA / after: 6 (60%) / 4 (40%) / 0 (0%)' in got, got
    print('sass_mix self-test: ok')


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('csv', nargs='?')
    ap.add_argument('--kernel')
    ap.add_argument('--per', type=int, default=0)
    ap.add_argument('--top', type=int, default=16)
    ap.add_argument('--between')
    ap.add_argument('--loop')
    ap.add_argument('--self-test', action='store_true')
    a = ap.parse_args()
    if a.self_test or not a.csv:
        self_test()
    else:
        report(open(a.csv).read(), a.kernel, a.per, a.top, region=tuple(a.between.split(',', 1)) if a.between else None,
               loop=a.loop)
