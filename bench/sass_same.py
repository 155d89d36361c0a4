#!/usr/bin/env python3
"""Are two PTX files' kernels the same machine code? Assembles each with ptxas (sm_90 unless --arch) and compares
the .text section of every kernel byte for byte -- what runs, where bench/ptx_same.py compares the PTX (a refactor
can renumber PTX registers and still give ptxas's identical SASS; H200 session 27). Kernels of A are matched to B by
name; --map OLD=NEW rewrites a substring of A's names first (a template argument added), as in ptx_same.py.
Prints one line a kernel and exits 1 if any differs or is missing.
  bench/sass_same.py before.ptx after.ptx [--map OLD=NEW] [--only SUBSTRING] [--ptxas PATH]
  bench/sass_same.py --self-test
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile


def text_sections(elf):
    """{kernel name: bytes} of an ELF64 little-endian cubin's .text.<name> sections."""
    if elf[:4] != b'\x7fELF' or elf[4] != 2 or elf[5] != 1:
        raise ValueError('not an ELF64 little-endian file')
    shoff, = struct.unpack_from('<Q', elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', elf, 0x3A)
    heads = [struct.unpack_from('<IIQQQQIIQQ', elf, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]
    names = elf[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for h in heads:
        name = names[h[0]:names.index(b'\0', h[0])].decode()
        if name.startswith('.text.'):
            out[name[len('.text.'):]] = elf[h[4]:h[4] + h[5]]
    return out


def assemble(ptx_path, arch, ptxas):
    with tempfile.TemporaryDirectory() as d:
        cubin = os.path.join(d, 'k.cubin')
        subprocess.run([ptxas, f'-arch={arch}', '-O3', ptx_path, '-o', cubin], check=True)
        with open(cubin, 'rb') as f:
            return text_sections(f.read())


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptx_same import compare_entries as compare  # noqa: E402  (one matcher for both scripts)


def self_test():
    # A minimal ELF64 with a section-name table and two .text sections.
    names = b'\0.shstrtab\0.text.k1\0.text.k2\0'
    body = b'AAAA' + b'BBBB'
    data_off = 64
    names_off = data_off + len(body)
    shoff = (names_off + len(names) + 7) & ~7
    hdr = bytearray(64)
    hdr[:6] = b'\x7fELF\x02\x01'
    struct.pack_into('<Q', hdr, 0x28, shoff)
    struct.pack_into('<HHH', hdr, 0x3A, 64, 4, 1)
    blob = bytearray(hdr) + body + names
    blob += b'\0' * (shoff - len(blob))
    sec = lambda n, off, size: struct.pack('<IIQQQQIIQQ', n, 1, 0, 0, off, size, 0, 0, 1, 0)
    blob += sec(0, 0, 0) + sec(1, names_off, len(names)) + sec(11, data_off, 4) + sec(20, data_off + 4, 4)
    t = text_sections(bytes(blob))
    assert t == {'k1': b'AAAA', 'k2': b'BBBB'}, t
    sink = open(os.devnull, 'w')
    assert compare(t, dict(t), out=sink) == 0
    assert compare(t, {'k1': b'AAAA', 'k2': b'BBBC'}, out=sink) == 1
    assert compare({'k1x': b'AAAA'}, t, maps=[('k1x', 'k1')], out=sink) == 0
    assert compare(t, {'k1': b'AAAA'}, out=sink) == 1
    print('self-test passed')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('a', nargs='?')
    ap.add_argument('b', nargs='?')
    ap.add_argument('--map', action='append', default=[], help='OLD=NEW applied to A\'s kernel names')
    ap.add_argument('--only')
    ap.add_argument('--arch', default='sm_90')
    ap.add_argument('--ptxas', default=os.environ.get('PTXAS', '/usr/local/cuda/bin/ptxas'))
    ap.add_argument('--self-test', action='store_true')
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0
    if not args.a or not args.b:
        ap.error('two PTX files are needed (or --self-test)')
    maps = [tuple(m.split('=', 1)) for m in args.map]
    a = assemble(args.a, args.arch, args.ptxas)
    b = assemble(args.b, args.arch, args.ptxas)
    return 1 if compare(a, b, maps, args.only) else 0


if __name__ == '__main__':
    sys.exit(main())
