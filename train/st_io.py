"""Minimal safetensors reader/writer (the format: 8-byte little-endian header length, a
JSON header {name: {dtype, shape, data_offsets}}, then the raw little-endian data).
Our own so that the scripts run on Debian's PyTorch 1.13, which has no float8 dtype:
F8_E4M3 tensors are handled as their uint8 bit patterns.
"""
import json
import os
import struct

import numpy as np
import torch

_TO_NP = {"F32": np.float32, "F16": np.float16, "BF16": np.int16, "U8": np.uint8, "F8_E4M3": np.uint8,
          "I32": np.int32, "I64": np.int64}


def _raw(t, dtype):
    t = t.detach().contiguous().cpu()
    if dtype == "BF16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
    if dtype == "F32":
        return t.to(torch.float32).numpy().tobytes()
    if dtype in ("U8", "F8_E4M3"):
        assert t.dtype == torch.uint8, f"{dtype} tensors are passed as uint8 bit patterns"
        return t.numpy().tobytes()
    raise ValueError(f"unsupported dtype {dtype}")


def save(path, tensors, metadata=None):
    """tensors: {name: (tensor, dtype)} with dtype one of BF16, F32, U8, F8_E4M3."""
    header = {}
    blobs = []
    off = 0
    for name in sorted(tensors):
        t, dtype = tensors[name]
        b = _raw(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def load(path):
    """{name: (tensor, dtype)}; BF16 comes back as torch.bfloat16, F8_E4M3 as uint8 bits."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(data, dtype=_TO_NP[info["dtype"]], count=(b - a) // np.dtype(_TO_NP[info["dtype"]]).itemsize,
                            offset=base + a).copy()
        t = torch.from_numpy(arr).reshape(info["shape"])
        if info["dtype"] == "BF16":
            t = t.view(torch.bfloat16)
        out[name] = (t, info["dtype"])
    return out


def save_sharded(dir_path, tensors, max_shard_bytes, metadata=None):
    """Writes model-0000k-of-0000n.safetensors shards plus model.safetensors.index.json
    (or one model.safetensors when everything fits one shard). Returns the file names."""
    sizes = {k: len(_raw(t, d)) for k, (t, d) in tensors.items()}
    shards = [[]]
    cur = 0
    for name in sorted(tensors):
        if shards[-1] and cur + sizes[name] > max_shard_bytes:
            shards.append([])
            cur = 0
        shards[-1].append(name)
        cur += sizes[name]
    if len(shards) == 1:
        save(os.path.join(dir_path, "model.safetensors"), tensors, metadata)
        return ["model.safetensors"]
    files = []
    weight_map = {}
    for i, names in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save(os.path.join(dir_path, fn), {k: tensors[k] for k in names}, metadata)
        files.append(fn)
        for k in names:
            weight_map[k] = fn
    with open(os.path.join(dir_path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(sizes.values())}, "weight_map": weight_map}, f, indent=1)
    return files + ["model.safetensors.index.json"]


def load_dir(dir_path):
    """All tensors of an HF directory (single file or sharded through the index)."""
    index = os.path.join(dir_path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for fn in files:
        out.update(load(os.path.join(dir_path, fn)))
    return out
