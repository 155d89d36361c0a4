"""Checks the fast paths of the training scripts against slow obviously-correct twins
(CPU, a few seconds; needs torch, numpy and regex: Debian python3-torch python3-regex):

  - the all-experts MoE layer against a per-token loop over the chosen experts;
  - NVFP4 quantise/dequantise against a per-element formula, nibble order included;
  - the BPE encoder against a brute-force merge loop, and the Qwen2 split;
  - safetensors write/read round trip.

    python3 train/selftest.py
"""
import os
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import nvfp4  # noqa: E402
import qwen3moe  # noqa: E402
import st_io  # noqa: E402


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        check.failed += 1


check.failed = 0


def test_moe():
    torch.manual_seed(0)
    c = qwen3moe.Config(hidden_size=32, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=16)
    m = qwen3moe.MoE(c)
    for p in m.parameters():
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(2, 5, 32)
    fast, _, _ = m(x)
    slow = torch.zeros_like(x).view(-1, 32)
    for n, xi in enumerate(x.view(-1, 32)):
        p = (xi @ m.gate.weight.t()).softmax(-1)
        w, idx = p.topk(2)
        w = w / w.sum()
        for wk, e in zip(w, idx):
            h = F.silu(m.w_gate[e] @ xi) * (m.w_up[e] @ xi)
            slow[n] += wk * (m.w_down[e] @ h)
    err = (fast.view(-1, 32) - slow).abs().max().item()
    check(err < 1e-4, f"all-experts MoE = per-token top-k loop (max err {err:.1e})")


def test_nvfp4():
    torch.manual_seed(1)
    w = torch.randn(8, 64) * torch.logspace(-3, 1, 64)  # blocks of very different ranges
    w[3, 16:32] = 0  # an all-zero block
    packed, sb, s2 = nvfp4.quantize(w)
    deq = nvfp4.dequantize(packed, sb, s2)
    slow = torch.zeros_like(w)
    e2m1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    for r in range(8):
        for k in range(64):
            byte = int(packed[r, k // 2])
            code = byte & 0xF if k % 2 == 0 else byte >> 4  # low nibble = element 2k
            v = e2m1[code & 7] * (-1 if code & 8 else 1)
            s = float(nvfp4.e4m3_decode(sb[r, k // 16:k // 16 + 1]))
            slow[r, k] = v * s * s2
    check(torch.equal(deq, slow), "NVFP4 dequantise = per-element formula")
    check(abs(s2 - w.abs().max().item() / (6 * 448)) < 1e-12, "weight_scale_2 = amax / (6 * 448)")
    # Every element is within half a step of its block's grid (the largest step is 2 at 4..6).
    step = nvfp4.e4m3_decode(sb).repeat_interleave(16, 1) * s2
    check(bool(((deq - w).abs() <= step * 1.0 + 1e-9).all()), "NVFP4 error within a grid step")
    check(bool((deq[3, 16:32] == 0).all()), "all-zero block stays zero")
    rel = ((deq - w).norm() / w.norm()).item()
    check(rel < 0.15, f"NVFP4 relative error {rel:.3f} < 0.15")


def test_bpe():
    text = "And God said, Let there be light: and there was light.\nAnd God saw the light, that it was good.\n" * 3
    vocab, merges = bpe.train([text, "In the beginning God created the heaven and the earth.\n"], 256 + 40 + 3)
    tok = bpe.Tokenizer(vocab, merges)
    check(len(vocab) == 299 and vocab["<|im_end|>"] == 298, "vocab size and special token ids")
    pieces = bpe.pre_tokenize("He said, 'tis 1611's light.\n\nAnd  God")
    want = ["He", "Ġsaid", ",", "Ġ'", "tis", "Ġ", "1", "6", "1", "1", "'s", "Ġlight", ".ĊĊ", "And", "Ġ", "ĠGod"]
    check(pieces == want, f"Qwen2 split {pieces}")
    s = "And God said unto Moses, I AM THAT I AM.\n"
    ids = tok.encode(s)
    check(tok.decode(ids) == s, "encode/decode round trip")
    # brute force: repeatedly apply the lowest-ranked merge present anywhere in each piece
    ranks = {m: r for r, m in enumerate(merges)}
    slow = []
    for piece in bpe.pre_tokenize(s):
        w = list(piece)
        while True:
            cands = [(ranks[(a, b)], i) for i, (a, b) in enumerate(zip(w, w[1:])) if (a, b) in ranks]
            if not cands:
                break
            r, _ = min(cands)
            a, b = merges[r]
            i, out = 0, []
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == (a, b):
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            w = out
        slow.extend(vocab[t] for t in w)
    check(ids == slow, "encoder = brute-force merge loop")


def test_safetensors():
    t = {"a": (torch.randn(3, 4).to(torch.bfloat16), "BF16"), "b": (torch.tensor(2.5), "F32"),
         "c": (torch.arange(10, dtype=torch.uint8).view(2, 5), "F8_E4M3")}
    with tempfile.TemporaryDirectory() as d:
        files = st_io.save_sharded(d, t, 20)
        back = st_io.load_dir(d)
    same = all(torch.equal(back[k][0], v[0]) and back[k][1] == v[1] for k, v in t.items())
    check(same and len(files) == 3, f"safetensors round trip through shards {files}")


if __name__ == "__main__":
    test_moe()
    test_nvfp4()
    test_bpe()
    test_safetensors()
    print(f"{check.failed} failed")
    sys.exit(1 if check.failed else 0)
