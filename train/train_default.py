"""Trains the default model (a small qwen3moe on the King James Bible) and writes its BF16
Hugging Face checkpoint plus the activation ranges that the NVFP4 export needs.

    python3 train_default.py --data DIR --out OUT [--time-budget 200] [--tiny --device cpu]

DIR holds tokenizer.json, tokenizer_config.json, kjv_train.ids, kjv_valid.ids, kjv_valid.txt
(made by bpe.py). OUT receives model*.safetensors (+ index), calib.json and config.json.
At the end it reports, on the held-out chapters, the loss of the BF16 weights and of the
NVFP4-quantised-dequantised ones, greedy samples of both, expert usage, and cross-checks
against the `tokenizers` and `transformers` packages where they are installed.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import nvfp4  # noqa: E402
import qwen3moe  # noqa: E402
import st_io  # noqa: E402

PROMPTS = ["And God said", "In the beginning", "The LORD is my shepherd",
           "Jesus answered and said unto them,", "Blessed are the"]


def log(msg):
    print(msg, flush=True)


def load_ids(path, device):
    return torch.from_numpy(np.fromfile(path, dtype="<u2").astype(np.int64)).to(device)


def model_config(args, vocab_size, eos_id):
    if args.tiny:  # the CPU dry run
        return qwen3moe.Config(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2,
                               num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                               num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                               max_position_embeddings=args.seq, eos_token_id=eos_id)
    return qwen3moe.Config(vocab_size=vocab_size, hidden_size=256, num_hidden_layers=8,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                           num_experts=16, num_experts_per_tok=4, moe_intermediate_size=192,
                           max_position_embeddings=args.seq, rope_theta=10000.0,
                           router_aux_loss_coef=args.aux_coef, eos_token_id=eos_id)


def autocast(device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


@torch.no_grad()
def evaluate(model, val, seq, device, batch=64):
    """Mean next-token loss over the held-out stream cut into windows of seq+1."""
    model.eval()
    n = (len(val) - 1) // seq
    xs = val[: n * seq].view(n, seq)
    ys = val[1: n * seq + 1].view(n, seq)
    total, count = 0.0, 0
    usage = torch.zeros(model.c.num_hidden_layers, model.c.num_experts, device=device)
    for i in range(0, n, batch):
        with autocast(device):
            logits, _, tops = model(xs[i:i + batch])
        total += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ys[i:i + batch].reshape(-1),
                                 reduction="sum").item()
        count += ys[i:i + batch].numel()
        for l, t in enumerate(tops):
            usage[l] += torch.bincount(t.reshape(-1), minlength=model.c.num_experts).float()
    model.train()
    return total / count, usage / usage.sum(-1, keepdim=True)


def hf_bf16(model):
    return {k: v.to(torch.bfloat16) for k, v in qwen3moe.hf_state_dict(model).items()}


def model_from_hf(c, tensors, device):
    m = qwen3moe.Model(c).to(device)
    qwen3moe.load_hf_state_dict(m, {k: v.to(device) for k, v in tensors.items()})
    return m


@torch.no_grad()
def calibrate(model, val, seq, device, n_windows=32):
    """Input absolute maxima of every quantised linear over some held-out windows."""
    c = model.c
    amax = {}
    hooks = []
    for l, layer in enumerate(model.layers):
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            key = f"model.layers.{l}.self_attn.{name}"

            def hook(mod, inp, out, key=key):
                amax[key] = max(amax.get(key, 0.0), inp[0].abs().max().item())
            hooks.append(getattr(layer.self_attn, name).register_forward_hook(hook))
        layer.mlp.calib = {"in": [0.0] * c.num_experts, "mid": [0.0] * c.num_experts}
    n = min(n_windows, (len(val) - 1) // seq)
    model.eval()
    model(val[: n * seq].view(n, seq))
    for h in hooks:
        h.remove()
    for l, layer in enumerate(model.layers):
        for e in range(c.num_experts):
            x = f"model.layers.{l}.mlp.experts.{e}."
            amax[x + "gate_proj"] = amax[x + "up_proj"] = layer.mlp.calib["in"][e]
            amax[x + "down_proj"] = layer.mlp.calib["mid"][e]
        layer.mlp.calib = None
    return amax


def samples(model, tok, eos, label):
    for p in PROMPTS:
        ids = tok.encode(p)
        out = qwen3moe.generate_greedy(model, ids, 40, eos)
        log(f"[{label}] {p!r} -> {tok.decode(out[len(ids):])!r}")


def cross_checks(args, c, model_bf16, tok, val_ids, hf_dir, device):
    # 1. Our BPE encoder against the tokenizers package on the held-out text.
    try:
        import tokenizers
        t = tokenizers.Tokenizer.from_file(os.path.join(args.data, "tokenizer.json"))
        text = open(os.path.join(args.data, "kjv_valid.txt"), encoding="utf-8").read()
        chapters = text.strip("\n").split("\n\n")
        theirs, ours = [], []
        for ch in chapters:
            theirs.extend(t.encode(ch + "\n").ids)
            ours.extend(tok.encode(ch + "\n"))
        same = theirs == ours
        log(f"check tokenizers {tokenizers.__version__}: {len(ours)} held-out tokens, identical={same}")
    except Exception as e:  # report, never abort the run
        log(f"check tokenizers: skipped ({type(e).__name__}: {e})")
    # 2. transformers' Qwen3MoeForCausalLM on our checkpoint gives our logits.
    try:
        import transformers
        try:
            hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
        except TypeError:  # transformers 4.x spells it torch_dtype
            hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32)
        hf = hf.to(device).eval()
        x = val_ids[:256].view(1, -1)
        with torch.no_grad():
            ref = hf(x).logits.float()
            ours, _, _ = model_bf16.float()(x)
        diff = (ref - ours.float()).abs().max().item()
        agree = (ref.argmax(-1) == ours.argmax(-1)).float().mean().item()
        log(f"check transformers {transformers.__version__}: max |logit diff| {diff:.2e}, argmax agreement {agree:.4f}")
    except Exception as e:
        log(f"check transformers: skipped ({type(e).__name__}: {e})")
    # 3. Our E4M3 rounding against PyTorch's float8_e4m3fn.
    if hasattr(torch, "float8_e4m3fn"):
        v = torch.rand(100000, device=device) * 460
        v = torch.cat([v, nvfp4.E4M3_VALUES.float().to(device), (nvfp4.E4M3_VALUES[1:] + nvfp4.E4M3_VALUES[:-1]).float().to(device) / 2])
        theirs = v.clamp(max=448).to(torch.float8_e4m3fn).view(torch.uint8)
        log(f"check float8_e4m3fn: {(theirs != nvfp4.e4m3_encode(v)).sum().item()} of {v.numel()} differ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny model, few steps (dry run)")
    ap.add_argument("--time-budget", type=float, default=180.0, help="seconds of training at most")
    ap.add_argument("--max-epochs", type=float, default=40.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--dropout", type=float, default=0.15)
    ap.add_argument("--aux-coef", type=float, default=0.01)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--max-steps", type=int, default=0, help="cap on steps (dry run)")
    ap.add_argument("--shard-mb", type=float, default=15.5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    t_start = time.time()
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        log(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    tok = bpe.load(args.data)
    eos = tok.token_id("<|endoftext|>")
    train_ids = load_ids(os.path.join(args.data, "kjv_train.ids"), device)
    val_ids = load_ids(os.path.join(args.data, "kjv_valid.ids"), device)
    c = model_config(args, len(tok.vocab), eos)
    model = qwen3moe.Model(c, dropout=args.dropout).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    n_expert = sum(p.numel() for n, p in model.named_parameters() if ".mlp.w_" in n)
    n_active = n_params - n_expert + n_expert * c.num_experts_per_tok // c.num_experts
    log(f"model: {n_params / 1e6:.2f}M parameters ({n_active / 1e6:.2f}M active), {vars(c)}")
    log(f"data: {len(train_ids)} train tokens, {len(val_ids)} held-out tokens, vocab {len(tok.vocab)}")

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt_kw = {"fused": True} if device.type == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **opt_kw)
    tokens_per_step = args.batch * args.seq
    epoch_steps = max(1, int(args.max_epochs * len(train_ids) / tokens_per_step))
    total_steps = epoch_steps if not args.max_steps else min(epoch_steps, args.max_steps)
    log(f"schedule: {tokens_per_step} tokens a step, at most {total_steps} steps ({args.max_epochs} epochs), "
        f"time budget {args.time_budget:.0f} s")

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        p = min(1.0, (step - args.warmup) / max(1, total_steps - args.warmup))
        return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))

    best = (float("inf"), None, -1)
    t_train = time.time()
    step = 0
    timed_from = None
    while step < total_steps:
        if step == 20:  # set the step count from the measured speed so the cosine ends in budget
            if device.type == "cuda":
                torch.cuda.synchronize()
            timed_from = (time.time(), step)
        if step == 60 and timed_from is not None:
            if device.type == "cuda":
                torch.cuda.synchronize()
            per_step = (time.time() - timed_from[0]) / (step - timed_from[1])
            fit = int(step + (args.time_budget - (time.time() - t_train)) / per_step)
            if fit < total_steps:
                total_steps = fit
            log(f"speed: {per_step * 1000:.1f} ms a step, {tokens_per_step / per_step / 1e3:.0f}k tokens/s; "
                f"training for {total_steps} steps ({total_steps * tokens_per_step / len(train_ids):.1f} epochs)")
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.randint(0, len(train_ids) - args.seq - 1, (args.batch,), device=device)
        offs = starts.unsqueeze(1) + torch.arange(args.seq + 1, device=device).unsqueeze(0)
        chunk = train_ids[offs]
        x, y = chunk[:, :-1], chunk[:, 1:]
        with autocast(device):
            logits, probs, tops = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        aux = model.aux_loss(probs, tops)
        opt.zero_grad(set_to_none=True)
        (loss + c.router_aux_loss_coef * aux).backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        last = step == total_steps or time.time() - t_train > args.time_budget
        if step % args.eval_every == 0 or last or step == 1:
            vl, usage = evaluate(model, val_ids, args.seq, device)
            if vl < best[0]:
                best = (vl, {k: v.detach().clone() for k, v in model.state_dict().items()}, step)
            log(f"step {step:5d}/{total_steps}  loss {loss.item():.4f}  aux {aux.item():.3f}  "
                f"val {vl:.4f}  lr {lr_at(step - 1):.2e}  gnorm {gnorm.item():.2f}  "
                f"experts/layer min-max share {usage.min().item():.3f}-{usage.max().item():.3f}  "
                f"{time.time() - t_train:.0f} s")
        if last:
            break
    train_s = time.time() - t_train
    log(f"trained {step} steps ({step * tokens_per_step / len(train_ids):.1f} epochs, "
        f"{step * tokens_per_step / 1e6:.1f}M tokens) in {train_s:.0f} s; best held-out loss "
        f"{best[0]:.4f} at step {best[2]}")

    # The exported model: the best step's weights rounded to BF16.
    model.load_state_dict(best[1])
    tensors = hf_bf16(model)
    model_bf16 = model_from_hf(c, tensors, device).eval()
    vl_bf16, usage = evaluate(model_bf16, val_ids, args.seq, device)
    fq = nvfp4.fake_quant_hf_tensors({k: v.float() for k, v in tensors.items()}, c.num_hidden_layers, c.num_experts)
    model_fq = model_from_hf(c, fq, device).eval()
    vl_fq, _ = evaluate(model_fq, val_ids, args.seq, device)
    log(f"held-out loss: bf16 {vl_bf16:.4f} (ppl {math.exp(vl_bf16):.2f}), nvfp4 {vl_fq:.4f} "
        f"(ppl {math.exp(vl_fq):.2f})")
    log("expert share of top-k slots on held-out text, per layer: " +
        "; ".join(" ".join(f"{v:.2f}" for v in row.tolist()) for row in usage))
    amax = calibrate(model_bf16, val_ids, args.seq, device)

    os.makedirs(args.out, exist_ok=True)
    files = st_io.save_sharded(args.out, {k: (v, "BF16") for k, v in tensors.items()},
                               int(args.shard_mb * 1024 * 1024), metadata={"format": "pt"})
    with open(os.path.join(args.out, "calib.json"), "w") as f:
        json.dump({"input_amax": amax, "val_loss_bf16": vl_bf16, "val_loss_nvfp4": vl_fq,
                   "steps": step, "train_seconds": train_s, "best_step": best[2]}, f, indent=1)
    hf_dir = os.path.join(args.out, "hf") if args.tiny else "/tmp/default-hf-bf16"
    os.makedirs(hf_dir, exist_ok=True)
    for fn in files:
        shutil.copy(os.path.join(args.out, fn), hf_dir)
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.data, fn), hf_dir)
    for d in (hf_dir, args.out):
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c.hf_config(), f, indent=1)
    log(f"wrote {files} and calib.json to {args.out}")

    samples(model_bf16, tok, eos, "bf16")
    samples(model_fq, tok, eos, "nvfp4")
    cross_checks(args, c, model_bf16, tok, val_ids, hf_dir, device)
    log(f"total {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
