"""NVFP4 weight quantisation the way NVIDIA ModelOpt exports it, in plain PyTorch
(no float8 dtype needed, so it runs on Debian's PyTorch 1.13 as on the H200):

  weight_scale_2 = amax(W) / (6 * 448)                         fp32, one per tensor
  weight_scale   = E4M3(amax(block of 16) / 6 / weight_scale_2)  one byte per 16 inputs
  code           = E2M1(W / (weight_scale * weight_scale_2))     4 bits, round to nearest
  weight         = uint8 [out, in/2], low nibble = element 2k, high nibble = element 2k+1
  input_scale    = amax(input activations) / (6 * 448)         fp32 (unused by llama.cpp)

Rounding is to nearest with ties to the even code, for E4M3 and E2M1 alike.
dequantize() is the obviously-correct inverse used to measure the loss of accuracy.
"""
import torch

E2M1_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
E4M3_MAX = 448.0
E2M1_MAX = 6.0


def _e4m3_values():
    vals = []
    for code in range(0x7F):  # 0x7F is NaN in E4M3FN; 0x7E = 448 is the largest
        e, m = code >> 3, code & 7
        vals.append(m / 8.0 * 2.0 ** -6 if e == 0 else (1.0 + m / 8.0) * 2.0 ** (e - 7))
    return torch.tensor(vals, dtype=torch.float64)


E4M3_VALUES = _e4m3_values()


def _round_to_table(x, table):
    """Index of the nearest table entry for x >= 0 (table increasing), ties to the even index."""
    t = table.to(torch.float64).to(x.device)
    mids = (t[1:] + t[:-1]) / 2
    xd = x.to(torch.float64)
    idx = torch.bucketize(xd, mids)  # mids[idx-1] < x <= mids[idx]
    at_mid = (idx < len(mids)) & (xd == mids[idx.clamp(max=len(mids) - 1)])
    idx = torch.where(at_mid & (idx % 2 == 1), idx + 1, idx)
    return idx.clamp(max=len(t) - 1)


def e4m3_encode(x):
    """Non-negative fp32 -> E4M3 bit pattern (uint8), saturating at 448."""
    return _round_to_table(x.clamp(min=0, max=E4M3_MAX), E4M3_VALUES).to(torch.uint8)


def e4m3_decode(bits):
    return E4M3_VALUES.to(bits.device)[(bits & 0x7F).long()].to(torch.float32)


def e2m1_encode(x):
    """fp32 -> 4-bit code (sign in bit 3), |x| saturating at 6."""
    mag = _round_to_table(x.abs().clamp(max=E2M1_MAX), E2M1_VALUES)
    sign = ((x < 0) & (mag > 0)).to(torch.int64)
    return (mag | (sign << 3)).to(torch.uint8)


def e2m1_decode(codes):
    v = E2M1_VALUES.to(codes.device)[(codes & 7).long()]
    return torch.where((codes & 8) != 0, -v, v)


def global_scale(amax):
    """weight_scale_2 / input_scale from an absolute maximum (1.0 for an all-zero tensor)."""
    amax = float(amax)
    return amax / (E2M1_MAX * E4M3_MAX) if amax > 0 else 1.0


def quantize(w, scale_2=None):
    """w: [out, in] float (in % 16 == 0). Returns (packed uint8 [out, in/2],
    weight_scale E4M3 bits uint8 [out, in/16], weight_scale_2 float)."""
    w = w.float()
    out_f, in_f = w.shape
    if in_f % 16:
        raise ValueError(f"NVFP4 needs the input dimension to be a multiple of 16, got {in_f}")
    if scale_2 is None:
        scale_2 = global_scale(w.abs().max())
    blocks = w.view(out_f, in_f // 16, 16)
    block_amax = blocks.abs().amax(-1)
    scale_bits = e4m3_encode(block_amax / E2M1_MAX / scale_2)
    denom = e4m3_decode(scale_bits) * scale_2  # (out, in/16)
    safe = torch.where(denom > 0, denom, torch.ones_like(denom))
    q = torch.where(denom.unsqueeze(-1) > 0, blocks / safe.unsqueeze(-1), torch.zeros_like(blocks))
    codes = e2m1_encode(q).view(out_f, in_f)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    return packed.contiguous(), scale_bits.contiguous(), float(scale_2)


def dequantize(packed, scale_bits, scale_2):
    out_f = packed.shape[0]
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).view(out_f, -1)  # element order
    vals = e2m1_decode(codes).view(out_f, -1, 16)
    return (vals * e4m3_decode(scale_bits).unsqueeze(-1) * scale_2).view(out_f, -1)


def quantize_dequantize(w, scale_2=None):
    return dequantize(*quantize(w, scale_2))


def fake_quant_hf_tensors(tensors, n_layers, n_experts):
    """A copy of HF-named fp32 tensors with every NVFP4-quantised weight replaced by its
    dequantised value, using the shared second-level scales of quantised_groups()."""
    out = dict(tensors)
    for group in quantised_groups(n_layers, n_experts):
        s2 = global_scale(max(float(tensors[n + ".weight"].float().abs().max()) for n in group))
        for n in group:
            out[n + ".weight"] = quantize_dequantize(tensors[n + ".weight"], s2)
    return out


def quantised_groups(n_layers, n_experts):
    """The quantised linears, grouped by shared weight_scale_2 / input_scale. ModelOpt gives
    q/k/v one scale and each expert's gate/up one scale (they read the same input and are
    fused in its deployment kernels); o_proj and each down_proj have their own."""
    groups = []
    for l in range(n_layers):
        a = f"model.layers.{l}.self_attn."
        groups.append([a + "q_proj", a + "k_proj", a + "v_proj"])
        groups.append([a + "o_proj"])
        for e in range(n_experts):
            x = f"model.layers.{l}.mlp.experts.{e}."
            groups.append([x + "gate_proj", x + "up_proj"])
            groups.append([x + "down_proj"])
    return groups
