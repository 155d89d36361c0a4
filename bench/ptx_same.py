#!/usr/bin/env python3
"""Are two PTX files' kernels the same code? (H200 session 26: a kernel's speed moved by several percent with code
that changed only its register numbering, so a refactor of a measured kernel is checked here before it lands.)

Compares the .entry functions of A and B after dropping .loc lines and renumbering what depends on a function's
position in the file (basic-block labels, local depots, the function's own name). Entries of A are matched to B by
name; --map OLD=NEW (repeatable, applied in order) rewrites a substring of A's names first (a template argument
added or removed), e.g. 'ELb1EEEv=ELb1ELb1EEEv'. Anonymous namespaces' hashed names are normalised away.
Prints one line a kernel and exits 1 if any differs or is missing.
  nvcc ... -ptx src/cuda/gemv_mma.cu -o before.ptx   (the file's compile command from build/compile_commands.json,
                                                      `-c` -> `-ptx`, one -arch=sm_90)
  bench/ptx_same.py before.ptx after.ptx [--map OLD=NEW] [--only SUBSTRING]
  bench/ptx_same.py --self-test
"""
import argparse
import re
import sys


ANON = re.compile(r'\d+_GLOBAL__N__[0-9a-f]{8}_\d+_\w+?_[0-9a-f]{8}')


def entries(text):
    """{name: body} of the .entry functions; anonymous namespaces' per-build names (a hash of the file's content:
    `36_GLOBAL__N__89b8bf71_4_t_cu_fd12c678`) read as one."""
    text = ANON.sub('_ANON_', text)
    out = {}
    for m in re.finditer(r'\.entry (\S+)\((.*?)\n\}\n', text, re.S):
        name, body = m.group(1), m.group(0)
        body = re.sub(r'\s*\.loc.*', '', body).replace(name, 'NAME')
        body = '\n'.join(l for l in body.split('\n') if l.strip())  # blank lines: where .loc lines were
        body = re.sub(r'\$L__BB\d+_', '$L__BB_', body)
        body = re.sub(r'__local_depot\d+', '__local_depot', body)
        out[name] = body
    return out


def compare(a_text, b_text, maps=(), only=None, out=sys.stdout):
    return compare_entries(entries(a_text), entries(b_text), maps, only, out)


def compare_entries(a, b, maps=(), only=None, out=sys.stdout):
    """Kernels {name: code} of A against B (bench/sass_same.py passes machine code); returns how many differ or miss."""
    bad = 0
    for name, body in a.items():
        if only and only not in name:
            continue
        target = name
        for old, new in maps:
            target = target.replace(old, new)
        if target not in b:
            print(f'missing  {target[:140]}', file=out)
            bad += 1
        elif b[target] != body:
            print(f'DIFFERS  {target[:140]}', file=out)
            bad += 1
        else:
            print(f'same     {target[:140]}', file=out)
    return bad


def self_test():
    import io
    f = '.visible .entry {n}(\n.param .u32 {n}_p\n)\n{{\n.loc 1 {l} 3\n$L__BB{i}_1:\n add.s32 %r1, %r2, {c};\n}}\n'
    a = f.format(n='k1', l=10, i=0, c=1) + f.format(n='k2', l=20, i=1, c=2)
    b = f.format(n='k2', l=99, i=0, c=2) + f.format(n='k1', l=5, i=1, c=1)
    buf = io.StringIO()
    assert compare(a, b, out=buf) == 0, buf.getvalue()
    c = f.format(n='k1x', l=10, i=0, c=1) + f.format(n='k2x', l=20, i=1, c=3)
    buf = io.StringIO()
    assert compare(a, c, maps=[('k1', 'k1x'), ('k2', 'k2x')], out=buf) == 1 and 'DIFFERS  k2x' in buf.getvalue()
    buf = io.StringIO()
    assert compare(a, b.replace('k2', 'k3'), out=buf) == 1 and 'missing  k2' in buf.getvalue()
    anon = '.visible .entry _ZN2ft36_GLOBAL__N__{h}_4_t_cu_{g}1kILi3EEEvPi(\n)\n{{\n add.s32 %r1, %r2, 1;\n}}\n'
    buf = io.StringIO()
    assert compare(anon.format(h='89b8bf71', g='fd12c678'), anon.format(h='0123abcd', g='9876fedc'), out=buf) == 0
    assert compare(anon.format(h='89b8bf71', g='fd12c678').replace('ILi3', 'ILi2'),
                   anon.format(h='0123abcd', g='9876fedc'), maps=[('ILi2', 'ILi3'), ('kI', 'kI')], out=buf) == 0
    print('ptx_same self-test: ok')


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('a', nargs='?')
    ap.add_argument('b', nargs='?')
    ap.add_argument('--map', action='append', default=[])
    ap.add_argument('--only')
    ap.add_argument('--self-test', action='store_true')
    x = ap.parse_args()
    if x.self_test or not x.a:
        self_test()
    else:
        maps = [tuple(m.split('=', 1)) for m in x.map]
        sys.exit(1 if compare(open(x.a).read(), open(x.b).read(), maps, x.only) else 0)
