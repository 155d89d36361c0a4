"""A Qwen3-MoE decoder in plain PyTorch with the semantics of transformers'
Qwen3MoeForCausalLM and llama.cpp's qwen3moe graph, written for training speed:

  x = embed(ids)
  per layer:  h = x + o_proj(attn(rope(q_norm(q_proj(n))), rope(k_norm(k_proj(n))), v_proj(n)))
              with n = rms_norm(x);  x = h + moe(rms_norm(h))
  moe(n):     p = softmax(gate(n)); top-k of p renormalised (norm_topk_prob);
              sum_e w_e * down_e(silu(gate_e(n)) * up_e(n))
  logits = lm_head(rms_norm(x))          (untied)

RoPE is the NeoX / rotate_half form (dims i and i + head_dim/2 form a pair). Every expert
is evaluated on every token and multiplied by its routing weight (zero unless chosen):
at this size (16 experts of 256x192) three large matmuls a layer beat 16x3 small ones,
and the result equals the sparse sum exactly. The state dict uses the checkpoint names
(model.layers.N.mlp.experts.E.gate_proj.weight ...) through hf_state_dict().
Runs on PyTorch 1.13 (Debian) and 2.x.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    def __init__(self, **kw):
        self.vocab_size = kw.get("vocab_size", 4096)
        self.hidden_size = kw.get("hidden_size", 256)
        self.num_hidden_layers = kw.get("num_hidden_layers", 8)
        self.num_attention_heads = kw.get("num_attention_heads", 4)
        self.num_key_value_heads = kw.get("num_key_value_heads", 2)
        self.head_dim = kw.get("head_dim", 64)
        self.num_experts = kw.get("num_experts", 16)
        self.num_experts_per_tok = kw.get("num_experts_per_tok", 4)
        self.moe_intermediate_size = kw.get("moe_intermediate_size", 192)
        self.max_position_embeddings = kw.get("max_position_embeddings", 512)
        self.rms_norm_eps = kw.get("rms_norm_eps", 1e-6)
        self.rope_theta = kw.get("rope_theta", 10000.0)
        self.router_aux_loss_coef = kw.get("router_aux_loss_coef", 0.01)
        self.bos_token_id = kw.get("bos_token_id", None)
        self.eos_token_id = kw.get("eos_token_id", None)

    def hf_config(self):
        """config.json of transformers' Qwen3MoeConfig (every expert layer sparse)."""
        return {
            "architectures": ["Qwen3MoeForCausalLM"],
            "model_type": "qwen3_moe",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "decoder_sparse_step": 1,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "hidden_size": self.hidden_size,
            "initializer_range": 0.02,
            "intermediate_size": self.moe_intermediate_size * self.num_experts_per_tok,
            "max_position_embeddings": self.max_position_embeddings,
            "max_window_layers": self.num_hidden_layers,
            "mlp_only_layers": [],
            "moe_intermediate_size": self.moe_intermediate_size,
            "norm_topk_prob": True,
            "num_attention_heads": self.num_attention_heads,
            "num_experts": self.num_experts,
            "num_experts_per_tok": self.num_experts_per_tok,
            "num_hidden_layers": self.num_hidden_layers,
            "num_key_value_heads": self.num_key_value_heads,
            "output_router_logits": False,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_scaling": None,
            "rope_theta": self.rope_theta,
            "router_aux_loss_coef": self.router_aux_loss_coef,
            "sliding_window": None,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": self.vocab_size,
        }


def rms_norm(x, weight, eps):
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * weight.float()).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def rope_tables(head_dim, n_pos, theta, device):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    ang = torch.outer(torch.arange(n_pos, device=device, dtype=torch.float32), inv)  # (T, hd/2)
    ang = torch.cat([ang, ang], dim=-1)  # (T, hd)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    # x: (B, H, T, hd); NeoX pairs (i, i + hd/2)
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x.float() * cos + rot.float() * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)
        self.q_norm = RMSNorm(c.head_dim, c.rms_norm_eps)
        self.k_norm = RMSNorm(c.head_dim, c.rms_norm_eps)

    def forward(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(B, T, c.num_attention_heads, c.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, c.num_key_value_heads, c.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        q = apply_rope(q, cos[:T], sin[:T])
        k = apply_rope(k, cos[:T], sin[:T])
        rep = c.num_attention_heads // c.num_key_value_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch 1.13
            s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(c.head_dim)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            o = (s.masked_fill(mask, float("-inf")).softmax(-1) @ v.float()).to(q.dtype)
        return self.o_proj(o.transpose(1, 2).reshape(B, T, -1))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        E, I, H = c.num_experts, c.moe_intermediate_size, c.hidden_size
        self.gate = nn.Linear(H, E, bias=False)  # the router
        self.w_gate = nn.Parameter(torch.empty(E, I, H))  # (E, out=I, in=H)
        self.w_up = nn.Parameter(torch.empty(E, I, H))
        self.w_down = nn.Parameter(torch.empty(E, H, I))  # (E, out=H, in=I)
        self.calib = None  # dict of per-expert input amax while calibrating

    def route(self, x2):
        """x2: (N, H) -> (probs (N, E) fp32, weights (N, E) zero except the top-k)."""
        c = self.c
        probs = self.gate(x2).float().softmax(-1)
        top_w, top_i = probs.topk(c.num_experts_per_tok, dim=-1)
        top_w = top_w / top_w.sum(-1, keepdim=True)
        w = torch.zeros_like(probs).scatter(-1, top_i, top_w)
        return probs, w, top_i

    def forward(self, x):
        c = self.c
        B, T, H = x.shape
        E, I = c.num_experts, c.moe_intermediate_size
        x2 = x.reshape(-1, H)
        probs, w, top_i = self.route(x2)
        g = x2 @ self.w_gate.reshape(E * I, H).t()
        u = x2 @ self.w_up.reshape(E * I, H).t()
        a = (F.silu(g) * u).view(-1, E, I)
        if self.calib is not None:
            chosen = w > 0  # (N, E)
            for e in range(E):
                m = chosen[:, e]
                if m.any():
                    self.calib["in"][e] = max(self.calib["in"][e], x2[m].abs().max().item())
                    self.calib["mid"][e] = max(self.calib["mid"][e], a[m, e].abs().max().item())
        a = a * w.to(a.dtype).unsqueeze(-1)
        y = a.reshape(-1, E * I) @ self.w_down.permute(0, 2, 1).reshape(E * I, H)
        return y.view(B, T, H), probs, top_i


class Layer(nn.Module):
    def __init__(self, c, dropout):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MoE(c)
        self.drop = nn.Dropout(dropout)  # training only; not part of the exported model

    def forward(self, x, cos, sin):
        x = x + self.drop(self.self_attn(self.input_layernorm(x), cos, sin))
        y, probs, top_i = self.mlp(self.post_attention_layernorm(x))
        return x + self.drop(y), probs, top_i


class Model(nn.Module):
    def __init__(self, c, dropout=0.0):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(Layer(c, dropout) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self, std=0.02):
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, mean=0.0, std=std)
            else:
                nn.init.ones_(p)

    def forward(self, ids):
        c = self.c
        cos, sin = rope_tables(c.head_dim, ids.shape[1], c.rope_theta, ids.device)
        x = self.embed_tokens(ids)
        all_probs, all_top = [], []
        for layer in self.layers:
            x, probs, top_i = layer(x, cos, sin)
            all_probs.append(probs)
            all_top.append(top_i)
        return self.lm_head(self.norm(x)), all_probs, all_top

    def aux_loss(self, all_probs, all_top):
        """transformers' load_balancing_loss_func over all layers' tokens: E * sum_e f_e * P_e,
        f_e = share of top-k slots given to e, P_e = mean router probability of e."""
        E = self.c.num_experts
        probs = torch.cat(all_probs, 0)
        top = torch.cat(all_top, 0)
        f = F.one_hot(top, E).float().mean(0)  # (k, E)
        P = probs.mean(0)  # (E,)
        return (f * P.unsqueeze(0)).sum() * E


# Checkpoint names <-> parameters.
def hf_state_dict(model):
    """The model's tensors under Hugging Face checkpoint names, experts split per expert."""
    out = {}
    for name, p in model.state_dict().items():
        t = p.detach()
        if ".mlp.w_" in name:
            prefix, kind = name.split(".mlp.w_")
            proj = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}[kind]
            for e in range(t.shape[0]):
                out[f"model.{prefix}.mlp.experts.{e}.{proj}.weight"] = t[e]
        elif name.startswith("lm_head."):
            out[name] = t
        else:
            out["model." + name] = t
    return out


def load_hf_state_dict(model, tensors):
    """Inverse of hf_state_dict()."""
    own = {}
    n_exp = model.c.num_experts
    for name in model.state_dict():
        if ".mlp.w_" in name:
            prefix, kind = name.split(".mlp.w_")
            proj = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}[kind]
            own[name] = torch.stack([tensors[f"model.{prefix}.mlp.experts.{e}.{proj}.weight"]
                                     for e in range(n_exp)])
        elif name.startswith("lm_head."):
            own[name] = tensors[name]
        else:
            own[name] = tensors["model." + name]
    model.load_state_dict({k: v.float() for k, v in own.items()})


@torch.no_grad()
def generate_greedy(model, ids, n_new, eos_id=None):
    """Greedy continuation by re-running the whole prefix (no KV cache: short samples)."""
    ids = list(ids)
    device = next(model.parameters()).device
    for _ in range(n_new):
        x = torch.tensor([ids[-model.c.max_position_embeddings:]], device=device)
        logits, _, _ = model(x)
        nxt = int(logits[0, -1].float().argmax())
        ids.append(nxt)
        if nxt == eos_id:
            break
    return ids
