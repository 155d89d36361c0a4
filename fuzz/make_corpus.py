#!/usr/bin/env python3
"""Writes the GGUF fuzz seed corpus (fuzz/corpus/) and the broken files used by the
CLI test (tests/data/bad/). Plain `struct`, independent of our C++ writer, following
shared/spec/gguf-format.md. Run from the repository root: python3 fuzz/make_corpus.py
"""
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# gguf value type ids
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
              BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# ggml types used here: (id, block size, bytes per block)
GGML = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q8_0": (8, 32, 34), "q4_k": (12, 256, 144),
        "bf16": (30, 1, 2), "nvfp4": (40, 64, 36), "i32": (26, 1, 4)}


def s(x):
    b = x.encode() if isinstance(x, str) else x
    return struct.pack("<Q", len(b)) + b


def val(t, v):
    if t == STR:
        return s(v)
    if t == ARR:
        et, items = v
        out = struct.pack("<iQ", et, len(items))
        for it in items:
            out += val(et, it)
        return out
    return struct.pack(SCALAR_FMT[t], v)


def kv(key, t, v):
    return s(key) + struct.pack("<i", t) + val(t, v)


def pad(n, a):
    return (n + a - 1) // a * a


def nbytes(tname, ne):
    _, blk, size = GGML[tname]
    n = ne[0] // blk * size
    for d in ne[1:]:
        n *= d
    return n


def gguf(kvs, tensors, version=3, align=32, magic=b"GGUF", offsets=None, n_kv=None,
         n_tensors=None, cut=None):
    """kvs: list of encoded kv records; tensors: list of (name, ggml type name, ne)."""
    out = magic + struct.pack("<IqQ", version, len(tensors) if n_tensors is None else n_tensors,
                              len(kvs) if n_kv is None else n_kv)
    for r in kvs:
        out += r
    off = 0
    datas = []
    for i, (name, tname, ne) in enumerate(tensors):
        nb = nbytes(tname, ne)
        o = off if offsets is None else offsets[i]
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", d) for d in ne)
        out += struct.pack("<iQ", GGML[tname][0], o)
        datas.append(bytes((i * 7 + k) & 0xFF for k in range(nb)))
        off += pad(nb, align)
    out += b"\0" * (pad(len(out), align) - len(out))
    for d in datas:
        out += d + b"\0" * (pad(len(d), align) - len(d))
    return out if cut is None else out[:cut]


def write(path, data):
    full = os.path.join(ROOT, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(data)


ARCH = kv("general.architecture", STR, "llama")
META = [ARCH, kv("general.name", STR, "tiny"), kv("llama.block_count", U32, 1),
        kv("llama.rope.freq_base", F32, 10000.0), kv("llama.use_parallel_residual", BOOL, 0)]
TENSORS = [("token_embd.weight", "q8_0", [64, 4]), ("blk.0.attn_norm.weight", "f32", [64]),
           ("output.weight", "nvfp4", [64, 2])]
ALL_TYPES = [kv("u8", U8, 255), kv("i8", I8, -128), kv("u16", U16, 65535), kv("i16", I16, -32768),
             kv("u32", U32, 2**32 - 1), kv("i32", I32, -2**31), kv("f32", F32, -0.0),
             kv("bool", BOOL, 1), kv("str", STR, "h\u00e9llo"), kv("u64", U64, 2**64 - 1),
             kv("i64", I64, -2**63), kv("f64", F64, 1e308),
             kv("tokens", ARR, (STR, ["<s>", "</s>", "a", ""])),
             kv("scores", ARR, (F32, [0.0, -1.5, 2.25])),
             kv("nested", ARR, (ARR, [(I32, [1, 2]), (I32, []), (I32, [3])])),
             kv("empty", ARR, (U8, []))]

# ---- seed corpus: valid files ------------------------------------------------
write("fuzz/corpus/valid_tiny.gguf", gguf(META, TENSORS))
write("fuzz/corpus/valid_all_types.gguf", gguf(ALL_TYPES, [("t", "f32", [4])]))
write("fuzz/corpus/valid_v2_no_tensors.gguf", gguf(META, [], version=2))
write("fuzz/corpus/valid_align64.gguf",
      gguf([kv("general.alignment", U32, 64)] + META,
           [("a", "f16", [3, 2]), ("b", "q4_k", [256]), ("c", "bf16", [2, 1, 1, 3])], align=64))
write("fuzz/corpus/valid_empty.gguf", gguf([], []))

# ---- broken files (seed corpus and the CLI test) --------------------------------
BAD = {
    "truncated_kv.gguf": (gguf(META, TENSORS, cut=100),
                          "cut off in the middle of metadata key 'general.name'"),
    "truncated_data.gguf": (gguf(META, TENSORS)[:-60],
                            "last tensor 'output.weight' data runs past the end of the file"),
    "bad_magic.gguf": (gguf(META, TENSORS, magic=b"GGML"), "magic is 'GGML', expected 'GGUF'"),
    "version1.gguf": (gguf(META, [], version=1), "GGUF version 1 (no longer supported)"),
    "big_endian.gguf": (b"GGUF" + struct.pack(">IqQ", 3, 0, 0),
                        "version field is big-endian (0x03000000)"),
    "bad_offset.gguf": (gguf(META, TENSORS, offsets=[0, 256, 288]),
                        "tensor 'blk.0.attn_norm.weight' has offset 256, expected 288"),
    "bad_alignment.gguf": (gguf([kv("general.alignment", U32, 48)] + META, TENSORS),
                           "general.alignment is 48, not a power of two"),
    "alignment_wrong_type.gguf": (gguf([kv("general.alignment", U64, 32)] + META, TENSORS),
                                  "general.alignment is uint64, must be uint32"),
    "duplicate_key.gguf": (gguf(META + [kv("general.name", STR, "again")], TENSORS),
                           "metadata key 'general.name' appears twice"),
    "duplicate_tensor.gguf": (gguf(META, TENSORS + [("output.weight", "f32", [8])]),
                              "tensor name 'output.weight' appears twice"),
    "unknown_value_type.gguf": (gguf(META + [s("x") + struct.pack("<i", 13) + b"\0" * 8], []),
                                "metadata key 'x' has value type id 13"),
    "removed_ggml_type.gguf": (gguf(META, [("w", "f32", [32])])
                               .replace(struct.pack("<I", 1) + struct.pack("<q", 32) +
                                        struct.pack("<i", 0),
                                        struct.pack("<I", 1) + struct.pack("<q", 32) +
                                        struct.pack("<i", 4)),
                               "tensor 'w' has ggml type 4 (Q4_2, removed)"),
    "block_size.gguf": (gguf(META, [("w", "q8_0", [32])])
                        .replace(struct.pack("<q", 32) + struct.pack("<i", 8),
                                 struct.pack("<q", 33) + struct.pack("<i", 8)),
                        "q8_0 tensor 'w' has 33 elements per row, not a multiple of 32"),
    "huge_array.gguf": (gguf([s("a") + struct.pack("<iiQ", ARR, U32, 2**31)], []),
                        "array count 2^31 is above the 2^30 limit"),
    "huge_string.gguf": (gguf([s("a") + struct.pack("<iQ", STR, 2**40)], []),
                         "string length 2^40 is above the 1 GiB limit"),
}
# built by hand: gguf() would try to generate the (huge) tensor data
BAD["dims_overflow.gguf"] = (
    b"GGUF" + struct.pack("<IqQ", 3, 1, len(META)) + b"".join(META) + s("w") +
    struct.pack("<IqqqiQ", 3, 2**32, 2**32, 4, 0, 0),
    "tensor 'w' shape [2^32, 2^32, 4] overflows the element count")

readme = ["# Broken GGUF files", "",
          "Made by `python3 fuzz/make_corpus.py`; each must make `ft inspect` exit with code 2",
          "and print an error naming the problem. The same files seed the fuzzer (fuzz/corpus/).",
          "", "| file | what is wrong |", "|---|---|"]
for name, (data, why) in BAD.items():
    write("tests/data/bad/" + name, data)
    write("fuzz/corpus/bad_" + name, data)
    readme.append(f"| `{name}` | {why} |")
with open(os.path.join(ROOT, "tests/data/bad/README.md"), "w") as f:
    f.write("\n".join(readme) + "\n")
