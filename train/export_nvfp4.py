"""Turns the BF16 checkpoint that train_default.py wrote into a ModelOpt-style NVFP4
Hugging Face checkpoint: attention and expert projections NVFP4 (weight uint8 [out, in/2],
weight_scale E4M3 [out, in/16], weight_scale_2 and input_scale fp32 scalars), the
embeddings, norms, routers and lm_head left in BF16; config.json with ModelOpt's
quantization_config and hf_quant_config.json as ModelOpt writes them.

    python3 export_nvfp4.py BF16_DIR TOKENIZER_DIR OUT_DIR [--bf16-out DIR]

BF16_DIR holds config.json, calib.json and model*.safetensors (sharded or not).
--bf16-out also assembles the BF16 checkpoint as a complete HF directory.
"""
import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvfp4  # noqa: E402
import st_io  # noqa: E402

MODELOPT_VERSION = "0.37.0"  # the ModelOpt release whose export format this follows


def quant_configs(config):
    ignore = ["lm_head"] + [f"model.layers.{l}.mlp.gate" for l in range(config["num_hidden_layers"])]
    producer = {"name": "modelopt", "version": MODELOPT_VERSION}
    hf_quant = {"producer": producer,
                "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                                 "exclude_modules": ignore}}
    fmt = {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16}
    in_config = {"config_groups": {"group_0": {"input_activations": dict(fmt), "weights": dict(fmt),
                                               "targets": ["Linear"]}},
                 "ignore": ignore, "quant_algo": "NVFP4", "producer": producer, "quant_method": "modelopt"}
    return hf_quant, in_config


def quantise_checkpoint(tensors, config, input_amax, log=print):
    """{name: (tensor, dtype)} of the NVFP4 checkpoint from HF-named BF16 tensors."""
    out = {}
    done = set()
    groups = nvfp4.quantised_groups(config["num_hidden_layers"], config["num_experts"])
    for i, group in enumerate(groups):
        ws = [tensors[n + ".weight"].float() for n in group]
        s2 = nvfp4.global_scale(max(float(w.abs().max()) for w in ws))
        in_scale = nvfp4.global_scale(max(input_amax[n] for n in group))
        for n, w in zip(group, ws):
            packed, scale_bits, _ = nvfp4.quantize(w, s2)
            out[n + ".weight"] = (packed, "U8")
            out[n + ".weight_scale"] = (scale_bits, "F8_E4M3")
            out[n + ".weight_scale_2"] = (torch.tensor(s2, dtype=torch.float32), "F32")
            out[n + ".input_scale"] = (torch.tensor(in_scale, dtype=torch.float32), "F32")
            done.add(n + ".weight")
        if (i + 1) % 64 == 0 or i + 1 == len(groups):
            log(f"quantised {i + 1}/{len(groups)} groups")
    for name, t in tensors.items():
        if name not in done:
            out[name] = (t.to(torch.bfloat16), "BF16")
    return out


def write_common(out_dir, tok_dir, config):
    os.makedirs(out_dir, exist_ok=True)
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, fn), out_dir)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config.get("bos_token_id"), "eos_token_id": config["eos_token_id"],
                   "do_sample": False}, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bf16_dir")
    ap.add_argument("tok_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--bf16-out")
    args = ap.parse_args()
    with open(os.path.join(args.bf16_dir, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(args.bf16_dir, "calib.json")) as f:
        input_amax = json.load(f)["input_amax"]
    tensors = {k: t for k, (t, _) in st_io.load_dir(args.bf16_dir).items()}
    print(f"{len(tensors)} BF16 tensors from {args.bf16_dir}")

    if args.bf16_out:
        write_common(args.bf16_out, args.tok_dir, config)
        with open(os.path.join(args.bf16_out, "config.json"), "w") as f:
            json.dump(config, f, indent=1)
        st_io.save(os.path.join(args.bf16_out, "model.safetensors"),
                   {k: (t, "BF16") for k, t in tensors.items()}, {"format": "pt"})
        print(f"BF16 checkpoint -> {args.bf16_out}")

    q = quantise_checkpoint(tensors, config, input_amax)
    hf_quant, in_config = quant_configs(config)
    write_common(args.out_dir, args.tok_dir, config)
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(dict(config, quantization_config=in_config), f, indent=1)
    with open(os.path.join(args.out_dir, "hf_quant_config.json"), "w") as f:
        json.dump(hf_quant, f, indent=4)
    path = os.path.join(args.out_dir, "model.safetensors")
    st_io.save(path, q, {"format": "pt"})
    print(f"NVFP4 checkpoint -> {args.out_dir} ({os.path.getsize(path) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
