#!/usr/bin/env python3
"""Static opcode mix of a kernel's loop in `cuobjdump -sass` or `nvdisasm -c` output (no ncu needed): for each function whose name
holds SUBSTRING, the innermost backward branch around the first instruction holding OP (IMMA: a tensor-core GEMV's
step loop) is taken as the loop, and its instructions are counted by opcode (predicated ones by their opcode too).
Static counts: a branch inside the loop (e.g. a divergent tile load) counts once, whatever runs.
  bench/sass_loop.py sass.txt[.gz] --kernel SUBSTRING [--op IMMA] [--top 30]
  bench/sass_loop.py --self-test
"""
import argparse
import collections
import gzip
import re
import sys

INS = re.compile(r'/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);')
# cuobjdump -sass names a function "Function : NAME"; nvdisasm, "//---- .text.NAME ----".
FUN = re.compile(r'Function : (\S+)|^//-+ \.text\.(\S+) -+')


LABEL = re.compile(r'^\s*(\.L_x_\d+):')
LABEL_REF = re.compile(r'`\((\.L_x_\d+)\)')


def resolved(body, labels):
    """nvdisasm names branch targets by label (`(.L_x_6)`); cuobjdump, by address. Labels become addresses."""
    return [(a, o, LABEL_REF.sub(lambda m: hex(labels.get(m.group(1), -1)) if m.group(1) in labels else m.group(0), r))
            for a, o, r in body]


def functions(text):
    """(name, [(addr, opcode, operands)]) per function of the dump."""
    name, body, labels, pending = None, [], {}, []
    for line in text.split('\n'):
        m = FUN.search(line)
        if m:
            if name is not None:
                yield name, resolved(body, labels)
            name, body, labels, pending = m.group(1) or m.group(2), [], {}, []
            continue
        m = LABEL.search(line)
        if m:
            pending.append(m.group(1))
            continue
        m = INS.search(line)
        if m and name is not None:
            addr = int(m.group(1), 16)
            for lab in pending:
                labels[lab] = addr
            pending = []
            body.append((addr, m.group(3), m.group(4).strip()))
    if name is not None:
        yield name, resolved(body, labels)


def loop_of(body, op):
    """The (start, end) indices of the innermost backward branch's range that holds the first `op` instruction."""
    first = next((i for i, (_, o, _) in enumerate(body) if o.startswith(op)), None)
    if first is None:
        return None
    best = None
    addr_index = {a: i for i, (a, _, _) in enumerate(body)}
    for i, (a, o, rest) in enumerate(body):
        if not o.startswith('BRA'):
            continue
        m = re.search(r'0x([0-9a-f]+)', rest)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target >= a or target not in addr_index:
            continue
        s = addr_index[target]
        if s <= first <= i and (best is None or i - s < best[1] - best[0]):
            best = (s, i)
    return best


def mix(body, lo, hi):
    c = collections.Counter(o.split('.')[0] + ('.128' if '.128' in o else '') for _, o, _ in body[lo:hi + 1])
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('path', nargs='?')
    ap.add_argument('--kernel', default='')
    ap.add_argument('--op', default='IMMA')
    ap.add_argument('--top', type=int, default=30)
    ap.add_argument('--self-test', action='store_true')
    a = ap.parse_args()
    if a.self_test:
        t = ('        Function : k1\n'
             '        /*0000*/                   MOV R1, c[0x0][0x28] ;\n'
             '        /*0010*/                   LDS R2, [R3] ;\n'
             '        /*0020*/                   IMMA.16832.S8.S8 R4, R6, R8, R4 ;\n'
             '        /*0030*/              @P0 PRMT R2, R2, 0x5140, R3 ;\n'
             '        /*0040*/              @P1 BRA 0x10 ;\n'
             '        /*0050*/                   EXIT ;\n')
        (n, b), = list(functions(t))
        lo, hi = loop_of(b, 'IMMA')
        m = mix(b, lo, hi)
        assert n == 'k1' and (lo, hi) == (1, 4) and m == {'LDS': 1, 'IMMA': 1, 'PRMT': 1, 'BRA': 1}, (n, lo, hi, m)
        t2 = ('//--------------------- .text.k2 --------------------------\n'
              '        /*0000*/                   MOV R1, c[0x0][0x28] ;\n'
              '.L_x_1:\n'
              '        /*0010*/                   LDS R2, [R3] ;\n'
              '        /*0020*/                   IMMA.16832.S8.S8 R4, R6, R8, R4 ;\n'
              '        /*0030*/              @P1 BRA `(.L_x_1) ;\n'
              '        /*0040*/                   EXIT ;\n')
        (n, b), = list(functions(t2))
        assert n == 'k2' and loop_of(b, 'IMMA') == (1, 3), (n, loop_of(b, 'IMMA'))
        print('ok')
        return 0
    raw = open(a.path, 'rb').read()
    text = (gzip.decompress(raw) if a.path.endswith('.gz') else raw).decode(errors='replace')
    for name, body in functions(text):
        if a.kernel not in name:
            continue
        lp = loop_of(body, a.op)
        if lp is None:
            print(f'{name}: {len(body)} instructions, no {a.op}')
            continue
        lo, hi = lp
        m = mix(body, lo, hi)
        print(f'{name}: {len(body)} instructions; loop {hi - lo + 1} ({body[lo][0]:#x}-{body[hi][0]:#x})')
        print('  ' + ', '.join(f'{k} {v}' for k, v in m.most_common(a.top)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
