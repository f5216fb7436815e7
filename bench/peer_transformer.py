"""PyTorch peer of bench/transformer_bench.cpp: the Cosmos3 transformer forward
(the Cosmos3 transformer as stepmix implements it, src/model/) as a plain eager implementation in bf16,
the way a Diffusers/HF-style module computes it: bf16 Linears through
F.linear, RMSNorm statistics in float32, HF "eager" attention (repeat_kv,
q·kᵀ, softmax in float32, ·v), the timestep embedder in float32.

Same checkpoint files and inputs as the stepmix side (bench/run-transformer.sh
writes them). Precision modes, with torch 1.13 (no float8 dtype):
  dense  bf16 weights of the BF16 checkpoint.
  w8a16  Ŵ = bf16(decode(code) · weight_scale), computed once at load (a cache:
         the peer's forward is then exactly a dense forward).
  w8a8   every Linear input quantized per call to the E4M3 grid (x / input_scale,
         clamp ±448, round to nearest even on the E4M3 grid, emulated with
         frexp/round), times the decoded E4M3 weight codes with F.linear (bf16
         operands hold E4M3 values exactly, float32 accumulation), output
         rounded to bf16, then scaled by input_scale · weight_scale in bf16
         (a second rounding the fused stepmix kernel does not have).

usage: peer_transformer.py --model DIR --mode dense|w8a16|w8a8 --tokens 256,1024
                           [--repeats R] [--threads T]
Reads DIR/bf16 or DIR/fp8 and DIR/inputs-<N>.safetensors; if
DIR/velocity-<mode>-<N>.f32 exists (stepmix's output), reports
max|peer - stepmix| / max|stepmix| as "deviation". Prints one JSON object per
token count: {"tokens", "mode", "ms": [each timed call], "deviation"}.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

BF16 = torch.bfloat16


# ---------------------------------------------------------------- files
def read_safetensors(path):
    """name -> torch tensor (a copy in memory). F8_E4M3 comes back as uint8 codes."""
    with open(path, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    numpy_of = {"F32": np.float32, "I64": np.int64, "BF16": np.int16, "F8_E4M3": np.uint8}
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end].tobytes(), dtype=numpy_of[entry["dtype"]]).reshape(entry["shape"])
        tensor = torch.from_numpy(array.copy())
        if entry["dtype"] == "BF16":
            tensor = tensor.view(BF16)
        out[name] = tensor
    return out


def e4m3_table():
    """float32 value of each of the 256 E4M3FN codes (docs/step-policy.md §12)."""
    values = []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exponent, mantissa = (code >> 3) & 0xF, code & 0x7
        if exponent == 0xF and mantissa == 0x7:
            values.append(float("nan"))
        elif exponent == 0:
            values.append(sign * mantissa * 2.0 ** -9)
        else:
            values.append(sign * 2.0 ** (exponent - 7) * (1 + mantissa / 8))
    return torch.tensor(values, dtype=torch.float32)


def quantize_e4m3_grid(x, input_scale):
    """bf16 tensor of E4M3 values: clamp(x / s, ±448) rounded to nearest even on the E4M3 grid."""
    v = (x.float() / input_scale).clamp_(-448.0, 448.0)
    _, exponent = torch.frexp(v)  # |v| = m · 2^exponent, m in [0.5, 1)
    # Grid step: 2^(floor(log2|v|) - 3) for normals, 2^-9 for subnormals.
    step_exponent = (exponent - 4).clamp_(min=-9).float()
    inverse_step = torch.exp2(-step_exponent)
    return (torch.round(v * inverse_step) / inverse_step).to(BF16)


# ---------------------------------------------------------------- model
class Linear:
    def __init__(self, weights, name, mode, table):
        w = weights[name + ".weight"]
        self.bias = weights.get(name + ".bias")
        self.input_scale = None
        if w.dtype == torch.uint8:  # FP8 checkpoint
            weight_scale = float(weights[name + ".weight_scale"])
            decoded = table[w.long()]
            if mode == "w8a16":
                self.weight = (decoded * weight_scale).to(BF16)
            else:
                self.weight = decoded.to(BF16)  # exact
                self.input_scale = float(weights[name + ".input_scale"])
                self.output_scale = self.input_scale * weight_scale
        else:
            self.weight = w

    def __call__(self, x):
        if self.input_scale is None:
            return F.linear(x, self.weight, self.bias)
        return F.linear(quantize_e4m3_grid(x, self.input_scale), self.weight) * self.output_scale


def rms_norm(x, weight, eps):
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(BF16)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x, cos, sin):  # x [rows, heads, D], cos/sin [rows, 1, D]
    return x * cos + rotate_half(x) * sin


def attention(q, k, v, causal):
    """HF eager attention: q [N, Hq, D], k/v [M, Hkv, D] -> [N, Hq·D]."""
    N, Hq, D = q.shape
    groups = Hq // k.shape[1]
    q = q.transpose(0, 1)
    k = k.transpose(0, 1).repeat_interleave(groups, dim=0)
    v = v.transpose(0, 1).repeat_interleave(groups, dim=0)
    scores = torch.matmul(q, k.transpose(1, 2)) * (1.0 / math.sqrt(D))
    if causal:
        mask = torch.full((N, k.shape[1]), float("-inf")).triu_(1)
        scores = scores + mask.to(BF16)
    # softmax in float32 as HF's softmax(..., dtype=torch.float32), written as
    # an explicit cast first: same numbers, and torch 1.13's CPU softmax with
    # a dtype argument on bf16 input takes a slow path (~25x slower here).
    weights = torch.softmax(scores.float(), dim=-1).to(BF16)
    return torch.matmul(weights, v).transpose(0, 1).reshape(N, Hq * D)


class Cosmos3Peer:
    def __init__(self, folder, mode):
        with open(os.path.join(folder, "config.json")) as f:
            c = json.load(f)
        self.c = c
        w = read_safetensors(os.path.join(folder, "diffusion_pytorch_model.safetensors"))
        table = e4m3_table()
        self.eps = c["rms_norm_eps"]
        self.D, self.Hq, self.Hkv = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
        lin = lambda name: Linear(w, name, mode, table)
        self.layers = []
        for k in range(c["num_hidden_layers"]):
            p = f"layers.{k}."
            a = p + "self_attn."
            layer = {n: w[p + n + ".weight"] for n in ("input_layernorm", "input_layernorm_moe_gen",
                                                         "post_attention_layernorm",
                                                         "post_attention_layernorm_moe_gen")}
            layer.update({n: w[a + n + ".weight"] for n in ("norm_q", "norm_k", "norm_added_q", "norm_added_k")})
            for n in ("to_q", "to_k", "to_v", "to_out", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"):
                layer[n] = lin(a + n)
            for m in ("mlp", "mlp_moe_gen"):
                layer[m] = {n: lin(p + m + "." + n) for n in ("gate_proj", "up_proj", "down_proj")}
            self.layers.append(layer)
        self.embed_tokens = w["embed_tokens.weight"]
        self.norm_moe_gen = w["norm_moe_gen.weight"]
        self.proj_in = Linear(w, "proj_in", "dense", table)
        self.proj_out = Linear(w, "proj_out", "dense", table)
        # The timestep embedder runs in float32 (as in stepmix and the reference).
        self.time_1 = (w["time_embedder.linear_1.weight"].float(), w["time_embedder.linear_1.bias"].float())
        self.time_2 = (w["time_embedder.linear_2.weight"].float(), w["time_embedder.linear_2.bias"].float())
        half = c["head_dim"] // 2
        self.inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, half, dtype=torch.float32) * 2 / c["head_dim"]))
        rT, rH, rW = c["rope_axes_dim"]
        self.slot_axis = torch.tensor([1 if (j % 3 == 1 and j < 3 * rH) else 2 if (j % 3 == 2 and j < 3 * rW) else 0
                                       for j in range(half)])

    def rope(self, position_ids):  # [3, S] float32 -> cos, sin [S, 1, D] bf16
        positions = position_ids[self.slot_axis, :].t()  # [S, D/2]
        angles = positions * self.inv_freq
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos().to(BF16)[:, None, :], emb.sin().to(BF16)[:, None, :]

    def mlp(self, m, x):
        return m["down_proj"](F.silu(m["gate_proj"](x)) * m["up_proj"](x))

    def forward(self, inputs):
        c, D, Hq, Hkv = self.c, self.D, self.Hq, self.Hkv
        ids = inputs["input_ids"]
        L = ids.shape[0]
        latent = inputs["vision_latent"].to(BF16)  # the transformer input in the activation dtype
        _, C, T, H, W = latent.shape
        p = c["latent_patch_size"]
        Hp, Wp = -(-H // p), -(-W // p)
        latent = F.pad(latent, (0, Wp * p - W, 0, Hp * p - H))
        patches = latent[0].reshape(C, T, Hp, p, Wp, p).permute(1, 2, 4, 3, 5, 0).reshape(T * Hp * Wp, p * p * C)
        gen = self.proj_in(patches)
        # Timestep embedding in float32, added to every (noisy) token in bf16.
        t = inputs["vision_timesteps"][:1].float() * c["timestep_scale"]
        freqs = torch.exp(-math.log(10000.0) * torch.arange(128, dtype=torch.float32) / 128)
        angles = t[:, None] * freqs[None, :]
        sinusoid = torch.cat((angles.cos(), angles.sin()), dim=-1)
        temb = F.linear(F.silu(F.linear(sinusoid, *self.time_1)), *self.time_2).to(BF16)
        gen = gen + temb
        und = self.embed_tokens[ids]
        cos, sin = self.rope(inputs["position_ids"])
        cos_u, sin_u, cos_g, sin_g = cos[:L], sin[:L], cos[L:], sin[L:]
        Nv, eps = gen.shape[0], self.eps
        for layer in self.layers:
            u = rms_norm(und, layer["input_layernorm"], eps)
            g = rms_norm(gen, layer["input_layernorm_moe_gen"], eps)
            q_u = rms_norm(layer["to_q"](u).view(L, Hq, D), layer["norm_q"], eps)
            k_u = rms_norm(layer["to_k"](u).view(L, Hkv, D), layer["norm_k"], eps)
            v_u = layer["to_v"](u).view(L, Hkv, D)
            q_g = rms_norm(layer["add_q_proj"](g).view(Nv, Hq, D), layer["norm_added_q"], eps)
            k_g = rms_norm(layer["add_k_proj"](g).view(Nv, Hkv, D), layer["norm_added_k"], eps)
            v_g = layer["add_v_proj"](g).view(Nv, Hkv, D)
            q_u, k_u = apply_rotary(q_u, cos_u, sin_u), apply_rotary(k_u, cos_u, sin_u)
            q_g, k_g = apply_rotary(q_g, cos_g, sin_g), apply_rotary(k_g, cos_g, sin_g)
            o_u = attention(q_u, k_u, v_u, causal=True)
            o_g = attention(q_g, torch.cat((k_u, k_g)), torch.cat((v_u, v_g)), causal=False)
            und = und + layer["to_out"](o_u)
            gen = gen + layer["to_add_out"](o_g)
            und = und + self.mlp(layer["mlp"], rms_norm(und, layer["post_attention_layernorm"], eps))
            gen = gen + self.mlp(layer["mlp_moe_gen"], rms_norm(gen, layer["post_attention_layernorm_moe_gen"], eps))
        pred = self.proj_out(rms_norm(gen, self.norm_moe_gen, eps))
        velocity = pred.reshape(T, Hp, Wp, p, p, C).permute(5, 0, 1, 3, 2, 4).reshape(C, T, Hp * p, Wp * p)
        return velocity[:, :, :H, :W][None].float()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", choices=["dense", "w8a16", "w8a8"], required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = Cosmos3Peer(os.path.join(args.model, "bf16" if args.mode == "dense" else "fp8"), args.mode)
    with torch.inference_mode():
        for tokens in [int(t) for t in args.tokens.split(",")]:
            inputs = read_safetensors(os.path.join(args.model, f"inputs-{tokens}.safetensors"))
            velocity = model.forward(inputs)  # warm-up (first-touch allocations, oneDNN primitive creation)
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                velocity = model.forward(inputs)
                times.append((time.perf_counter() - start) * 1e3)
            deviation = None
            theirs = os.path.join(args.model, f"velocity-{args.mode}-{tokens}.f32")
            if os.path.exists(theirs):
                ref = torch.from_numpy(np.fromfile(theirs, dtype=np.float32)).reshape(velocity.shape)
                deviation = float((velocity - ref).abs().max() / ref.abs().max())
            print(json.dumps({"tokens": tokens, "mode": args.mode, "ms": times, "deviation": deviation}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
