"""Loads a checkpoint directory written by export_nvfp4.py (BF16 or ModelOpt NVFP4; NVFP4
weights dequantised by the slow formula) into the PyTorch model, and prints its held-out
loss and greedy continuations with their token ids (the reference for `ft generate`).

    python3 eval_checkpoint.py HF_DIR --valid kjv_valid.ids [--windows 8] [--prompt TEXT]...
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import nvfp4  # noqa: E402
import qwen3moe  # noqa: E402
import st_io  # noqa: E402


def load_model(hf_dir):
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
            "max_position_embeddings", "rms_norm_eps", "rope_theta", "eos_token_id")
    c = qwen3moe.Config(**{k: cfg[k] for k in keys})
    raw = st_io.load_dir(hf_dir)
    tensors = {}
    for name, (t, dtype) in raw.items():
        if name.endswith((".weight_scale", ".weight_scale_2", ".input_scale")):
            continue
        base = name[: -len(".weight")]
        if dtype == "U8" and base + ".weight_scale" in raw:
            s2 = float(raw[base + ".weight_scale_2"][0]) if base + ".weight_scale_2" in raw else 1.0
            tensors[name] = nvfp4.dequantize(t, raw[base + ".weight_scale"][0], s2)
        else:
            tensors[name] = t.float()
    m = qwen3moe.Model(c)
    qwen3moe.load_hf_state_dict(m, tensors)
    return m.eval(), c


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("--valid", help="uint16 ids of the held-out text")
    ap.add_argument("--windows", type=int, default=8, help="held-out windows of 512 to score (0: all)")
    ap.add_argument("--prompt", action="append")
    ap.add_argument("--tokens", type=int, default=40)
    args = ap.parse_args()
    torch.set_num_threads(2)
    model, c = load_model(args.hf_dir)
    tok = bpe.load(args.hf_dir)
    if args.valid:
        ids = torch.from_numpy(np.fromfile(args.valid, dtype="<u2").astype(np.int64))
        seq = c.max_position_embeddings
        n = (len(ids) - 1) // seq
        if args.windows:
            n = min(n, args.windows)
        total = 0.0
        for i in range(n):
            x = ids[i * seq:(i + 1) * seq].view(1, -1)
            y = ids[i * seq + 1:(i + 1) * seq + 1]
            logits, _, _ = model(x)
            total += F.cross_entropy(logits[0], y, reduction="sum").item()
        loss = total / (n * seq)
        print(f"held-out loss over {n} windows of {seq}: {loss:.4f} (ppl {math.exp(loss):.2f})")
    for p in args.prompt or ["And God said"]:
        ids = tok.encode(p)
        out = qwen3moe.generate_greedy(model, ids, args.tokens, c.eos_token_id)
        print(f"{p!r} -> {tok.decode(out[len(ids):])!r}")
        print(f"  ids {out}")


if __name__ == "__main__":
    main()
