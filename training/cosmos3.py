"""Cosmos3 omni transformer (vision-generation path) in plain PyTorch 1.13.

Follows the Cosmos3 transformer as stepmix implements it (src/model/): the same config keys, the same parameter names as the
Diffusers `Cosmos3OmniTransformer` state dict, two towers per layer (understanding = causal text stream,
generation = vision stream that attends to [text keys; vision keys]), interleaved 3-axis mRoPE, per-head
q/k RMSNorm, SwiGLU MLPs, grouped-query attention, and the timestep embedding added to noisy vision tokens
only. Computation is float32 throughout (training and reference checks); the BF16 rounding points of the
reference pipeline belong to the runtime, not to this module.

The forward is batched so it can train: text prefixes of different lengths are right-padded and padded
rows are masked out of every key set, which makes each sample's result identical to an unpadded call.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# Every key the Diffusers config writes, with the Diffusers defaults (Nano). Exported configs carry all of
# them, overridden by the model's values.
DEFAULT_CONFIG = {
    "_class_name": "Cosmos3OmniTransformer",
    "_diffusers_version": "0.40.0.dev0",
    "action_dim": None,
    "action_gen": False,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "base_fps": 24,
    "enable_fps_modulation": True,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "latent_channel": 48,
    "latent_patch_size": 2,
    "num_attention_heads": 32,
    "num_embodiment_domains": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "patch_latent_dim": 192,
    "qk_norm_for_text": True,
    "rms_norm_eps": 1e-06,
    "rope_axes_dim": [24, 20, 20],
    "rope_scaling": None,
    "rope_theta": 5000000.0,
    "sound_dim": None,
    "sound_gen": False,
    "sound_latent_fps": 25.0,
    "timestep_scale": 0.001,
    "unified_3d_mrope_reset_spatial_ids": True,
    "unified_3d_mrope_temporal_modality_margin": 15000,
    "use_und_k_norm_for_gen": False,
    "vocab_size": 151936,
}


def full_config(**overrides):
    cfg = dict(DEFAULT_CONFIG)
    for k, v in overrides.items():
        if k not in cfg:
            raise KeyError(f"unknown config key {k}")
        cfg[k] = v
    return cfg


class RMSNorm(nn.Module):
    """Standard RMSNorm over the last dim (the `silu` models' norm): x / rms(x) * w."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


class GatedMLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class SquaredReluMLP(nn.Module):
    """The `relu2` models' MLP: down(relu(up(x))^2), no gate."""

    def __init__(self, hidden, inter):
        super().__init__()
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.relu(self.up_proj(x)).square())


class TimestepEmbedding(nn.Module):
    def __init__(self, in_ch, hidden):
        super().__init__()
        self.linear_1 = nn.Linear(in_ch, hidden)
        self.linear_2 = nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.linear_2(F.silu(self.linear_1(x)))


def timestep_sinusoid(tau, channels=256, max_period=10000.0):
    """Diffusers `Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=0)`: [cos | sin]."""
    half = channels // 2
    exponent = -math.log(max_period) * torch.arange(0, half, dtype=torch.float32) / half
    ang = tau.float()[..., None] * torch.exp(exponent)
    return torch.cat([torch.cos(ang), torch.sin(ang)], dim=-1)


def rope_inv_freq(theta, head_dim):
    # Computed exactly as torch/upstream do (float32 pow of an int64 arange): a correctly rounded
    # inv_freq differs by 1 ulp in places, which matters at vision positions around 15000.
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))


def rope_axis_of_slot(rope_axes_dim, half):
    """Slot j -> position row (0 = T, 1 = H, 2 = W) for interleaved mRoPE."""
    r_t, r_h, r_w = rope_axes_dim
    axes = []
    for j in range(half):
        if j % 3 == 1 and j < 3 * r_h:
            axes.append(1)
        elif j % 3 == 2 and j < 3 * r_w:
            axes.append(2)
        else:
            axes.append(0)
    if axes.count(0) != r_t:
        raise ValueError(f"rope_axes_dim {rope_axes_dim} gives {axes.count(0)} T slots for head_dim {2 * half}")
    return torch.tensor(axes)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def attention(q, k, v, mask):
    """q [B,Hq,Nq,D], k/v [B,Hkv,Nk,D]; mask [B,1,Nq,Nk] bool (True = may attend) or None.

    Grouped-query attention: query head h reads kv head h // G. The G query heads of one kv head are
    stacked along the rows ([B, Hkv, G*Nq, D]) so k and v are used in place, never copied G times.
    """
    b, hq, nq, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    groups = hq // hkv
    q = q.reshape(b, hkv, groups * nq, d) * (1.0 / math.sqrt(d))
    scores = torch.matmul(q, k.transpose(-1, -2))
    if mask is not None:
        if groups > 1 and mask.shape[2] > 1:  # per-query masks repeat for each head of the group
            mask = mask.repeat(1, 1, groups, 1)
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v).reshape(b, hq, nq, d)


class Cosmos3Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        e, d = cfg["hidden_size"], cfg["head_dim"]
        hq, hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        bias, eps = cfg["attention_bias"], cfg["rms_norm_eps"]
        self.hq, self.hkv, self.d = hq, hkv, d
        # understanding (reasoner) tower
        self.to_q = nn.Linear(e, hq * d, bias=bias)
        self.to_k = nn.Linear(e, hkv * d, bias=bias)
        self.to_v = nn.Linear(e, hkv * d, bias=bias)
        self.to_out = nn.Linear(hq * d, e, bias=bias)
        if cfg["qk_norm_for_text"]:
            self.norm_q = RMSNorm(d, eps)
            self.norm_k = RMSNorm(d, eps)
        else:
            self.norm_q = self.norm_k = None
        if cfg["use_und_k_norm_for_gen"] and not cfg["qk_norm_for_text"]:
            self.k_norm_und_for_gen = RMSNorm(d, eps)
        else:
            self.k_norm_und_for_gen = None
        # generation tower
        self.add_q_proj = nn.Linear(e, hq * d, bias=bias)
        self.add_k_proj = nn.Linear(e, hkv * d, bias=bias)
        self.add_v_proj = nn.Linear(e, hkv * d, bias=bias)
        self.to_add_out = nn.Linear(hq * d, e, bias=bias)
        self.norm_added_q = RMSNorm(d, eps)
        self.norm_added_k = RMSNorm(d, eps)

    def forward(self, u, g, rope_u, rope_g, mask_u, mask_g):
        b, lu, _ = u.shape
        ng = g.shape[1]
        q_u = self.to_q(u).view(b, lu, self.hq, self.d)
        k_u = self.to_k(u).view(b, lu, self.hkv, self.d)
        v_u = self.to_v(u).view(b, lu, self.hkv, self.d)
        q_g = self.add_q_proj(g).view(b, ng, self.hq, self.d)
        k_g = self.add_k_proj(g).view(b, ng, self.hkv, self.d)
        v_g = self.add_v_proj(g).view(b, ng, self.hkv, self.d)
        if self.norm_q is not None:
            q_u = self.norm_q(q_u)
            k_u = self.norm_k(k_u)
        k_ug = self.k_norm_und_for_gen(k_u) if self.k_norm_und_for_gen is not None else k_u
        q_g = self.norm_added_q(q_g)
        k_g = self.norm_added_k(k_g)

        cu, su = rope_u  # [B, rows, 1, D]
        cg, sg = rope_g
        q_u = q_u * cu + rotate_half(q_u) * su
        k_u = k_u * cu + rotate_half(k_u) * su
        k_ug = k_ug * cu + rotate_half(k_ug) * su if k_ug is not k_u else k_u
        q_g = q_g * cg + rotate_half(q_g) * sg
        k_g = k_g * cg + rotate_half(k_g) * sg

        t = lambda x: x.transpose(1, 2)  # [B, rows, H, D] -> [B, H, rows, D]
        o_u = attention(t(q_u), t(k_u), t(v_u), mask_u)
        o_g = attention(t(q_g), torch.cat([t(k_ug), t(k_g)], dim=2), torch.cat([t(v_u), t(v_g)], dim=2), mask_g)
        o_u = o_u.transpose(1, 2).reshape(b, lu, self.hq * self.d)
        o_g = o_g.transpose(1, 2).reshape(b, ng, self.hq * self.d)
        return self.to_out(o_u), self.to_add_out(o_g)


class Cosmos3DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        e, i, eps = cfg["hidden_size"], cfg["intermediate_size"], cfg["rms_norm_eps"]
        self.input_layernorm = RMSNorm(e, eps)
        self.input_layernorm_moe_gen = RMSNorm(e, eps)
        self.post_attention_layernorm = RMSNorm(e, eps)
        self.post_attention_layernorm_moe_gen = RMSNorm(e, eps)
        self.self_attn = Cosmos3Attention(cfg)
        # relu2 models' Nemotron RMSNorm is w·x·r rounded once: the same as
        # RMSNorm's in float32, which is all this module computes.
        mlp = SquaredReluMLP if cfg["hidden_act"] == "relu2" else GatedMLP
        self.mlp = mlp(e, i)
        self.mlp_moe_gen = mlp(e, i)

    def forward(self, und, gen, rope_u, rope_g, mask_u, mask_g):
        u_a, g_a = self.self_attn(self.input_layernorm(und), self.input_layernorm_moe_gen(gen),
                                  rope_u, rope_g, mask_u, mask_g)
        und = und + u_a
        gen = gen + g_a
        und = und + self.mlp(self.post_attention_layernorm(und))
        gen = gen + self.mlp_moe_gen(self.post_attention_layernorm_moe_gen(gen))
        return und, gen


class Cosmos3Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg["hidden_act"] not in ("silu", "relu2"):
            raise ValueError("hidden_act must be 'silu' or 'relu2'")
        if cfg["patch_latent_dim"] != cfg["latent_patch_size"] ** 2 * cfg["latent_channel"]:
            raise ValueError("patch_latent_dim must equal latent_patch_size^2 * latent_channel")
        if cfg["num_attention_heads"] % cfg["num_key_value_heads"]:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        self.cfg = dict(cfg)
        e = cfg["hidden_size"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], e)
        self.layers = nn.ModuleList([Cosmos3DecoderLayer(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(e, cfg["rms_norm_eps"])
        self.norm_moe_gen = RMSNorm(e, cfg["rms_norm_eps"])
        self.lm_head = nn.Linear(e, cfg["vocab_size"], bias=False)  # text head: unused for generation
        self.proj_in = nn.Linear(cfg["patch_latent_dim"], e)
        self.proj_out = nn.Linear(e, cfg["patch_latent_dim"])
        self.time_embedder = TimestepEmbedding(256, e)
        axes_dim = cfg["rope_axes_dim"]
        if axes_dim is None:
            axes_dim = (cfg["rope_scaling"] or {}).get("mrope_section", [24, 20, 20])
        self.register_buffer("inv_freq", rope_inv_freq(cfg["rope_theta"], cfg["head_dim"]), persistent=False)
        self.register_buffer("rope_axis", rope_axis_of_slot(axes_dim, cfg["head_dim"] // 2), persistent=False)

    # ---- initialisation used for training from scratch ----
    def init_weights(self, generator):
        n_layers = self.cfg["num_hidden_layers"]
        for name, p in self.named_parameters():
            with torch.no_grad():
                if name.endswith("norm.weight") or "layernorm" in name or ".norm_" in name or name.startswith("norm"):
                    p.fill_(1.0)
                elif name.endswith(".bias"):
                    p.zero_()
                elif name.startswith("proj_out"):
                    p.zero_()  # start as a zero velocity predictor: stable first steps
                elif name.endswith(("to_out.weight", "to_add_out.weight", "down_proj.weight")):
                    # residual branches scaled down with depth (GPT-2 style)
                    p.normal_(0.0, 0.02 / math.sqrt(2 * n_layers), generator=generator)
                else:
                    p.normal_(0.0, 0.02, generator=generator)

    # ---- helpers ----
    def rope_tables(self, position_ids):
        """position_ids [B, 3, S] float32 -> (cos, sin) [B, S, D] float32."""
        pos = position_ids.float()
        per_slot = pos[:, self.rope_axis, :]  # [B, D/2, S]: the axis row each slot reads
        ang = (per_slot * self.inv_freq[None, :, None]).transpose(1, 2)  # one float32 product each
        emb = torch.cat([ang, ang], dim=-1)
        return torch.cos(emb), torch.sin(emb)

    def patchify(self, latent):
        b, c, t, h, w = latent.shape
        p = self.cfg["latent_patch_size"]
        hp, wp = -(-h // p), -(-w // p)
        if hp * p != h or wp * p != w:
            latent = F.pad(latent, (0, wp * p - w, 0, hp * p - h))
        x = latent.reshape(b, c, t, hp, p, wp, p).permute(0, 2, 3, 5, 4, 6, 1)
        return x.reshape(b, t * hp * wp, p * p * c), (t, hp, wp)

    def unpatchify(self, tokens, tn, hp, wp, h, w):
        b = tokens.shape[0]
        p, c = self.cfg["latent_patch_size"], self.cfg["latent_channel"]
        x = tokens.reshape(b, tn, hp, wp, p, p, c).permute(0, 6, 1, 2, 4, 3, 5)
        return x.reshape(b, c, tn, hp * p, wp * p)[..., :h, :w]

    def position_ids(self, text_len, max_len, grid, fps=None):
        """Pipeline position ids (cosmos3-pipeline.md §7) for right-padded text: [B, 3, max_len + Nv]."""
        t, hp, wp = grid
        b = text_len.shape[0]
        cfg = self.cfg
        text = torch.arange(max_len, dtype=torch.float32)[None].expand(b, max_len)
        text = text * (text < text_len[:, None]).float()  # padded rows: position 0 (masked anyway)
        offset = (text_len + cfg["unified_3d_mrope_temporal_modality_margin"]).float()  # [B]
        f = torch.arange(t, dtype=torch.float32)
        if cfg["enable_fps_modulation"] and t > 1 and fps is not None:
            tps, base_tps = torch.tensor(fps / 4.0), torch.tensor(cfg["base_fps"] / 4.0)
            tt = (f / tps) * base_tps
        else:
            tt = f
        tt = tt[None, :, None, None] + offset[:, None, None, None]
        hh = torch.arange(hp, dtype=torch.float32)[None, None, :, None]
        ww = torch.arange(wp, dtype=torch.float32)[None, None, None, :]
        if not cfg["unified_3d_mrope_reset_spatial_ids"]:
            hh = hh + offset[:, None, None, None]
            ww = ww + offset[:, None, None, None]
        shape = (b, t, hp, wp)
        vis = torch.stack([tt.expand(shape), hh.expand(shape), ww.expand(shape)], dim=1).reshape(b, 3, -1)
        return torch.cat([text[:, None, :].expand(b, 3, max_len), vis], dim=2)

    # ---- forward ----
    def forward(self, input_ids, text_len, latent, timesteps, fps=None, noisy_frames=None,
                position_ids=None, return_hidden=False):
        """
        input_ids   [B, Lmax] long, right-padded; text_len [B] long (real lengths).
        latent      [B, C, T, H, W]; timesteps [B] or [B, Nn] (scheduler timestep, i.e. sigma*1000).
        noisy_frames  list of frame indices being denoised (default: all).
        position_ids  optional [B, 3, Lmax + Nv]; built as the Cosmos3 pipeline does when omitted.
        Returns the velocity [B, C, T, H, W] (zeros at conditioning frames) and, if return_hidden,
        a dict of intermediate tensors (for reference checks).
        """
        cfg = self.cfg
        b, lmax = input_ids.shape
        _, c, t, h, w = latent.shape
        if noisy_frames is None:
            noisy_frames = list(range(t))
        patches, (t, hp, wp) = self.patchify(latent.float())
        per_frame = hp * wp
        tok = self.proj_in(patches)
        hidden = {"vision_proj_in": tok} if return_hidden else None

        rows = torch.cat([torch.arange(f * per_frame, (f + 1) * per_frame) for f in noisy_frames])
        nn_tokens = rows.numel()
        ts = timesteps.float()
        if ts.dim() == 1:
            ts = ts[:, None].expand(b, nn_tokens)
        tau = ts * cfg["timestep_scale"]
        temb = self.time_embedder(timestep_sinusoid(tau))  # [B, Nn, E]
        if len(noisy_frames) == t:
            tok = tok + temb if list(noisy_frames) == list(range(t)) else tok.index_add(1, rows, temb)
        else:
            tok = tok.index_add(1, rows, temb)  # conditioning frames get no timestep embedding

        und = self.embed_tokens(input_ids)
        gen = tok
        if return_hidden:
            hidden.update(timestep_embed=temb, und_embed=und, gen_embed=gen)

        if position_ids is None:
            position_ids = self.position_ids(text_len, lmax, (t, hp, wp), fps)
        cos, sin = self.rope_tables(position_ids)
        rope_u = (cos[:, :lmax, None, :], sin[:, :lmax, None, :])
        rope_g = (cos[:, lmax:, None, :], sin[:, lmax:, None, :])
        if return_hidden:
            hidden.update(rope_cos=cos, rope_sin=sin)

        valid = torch.arange(lmax)[None, :] < text_len[:, None]  # [B, Lmax]
        causal = torch.ones(lmax, lmax, dtype=torch.bool).tril()
        mask_u = (causal[None] & valid[:, None, :])[:, None]  # [B,1,L,L]
        if bool(valid.all()):
            mask_g = None
        else:
            keys = torch.cat([valid, torch.ones(b, gen.shape[1], dtype=torch.bool)], dim=1)
            mask_g = keys[:, None, None, :]

        for i, layer in enumerate(self.layers):
            und, gen = layer(und, gen, rope_u, rope_g, mask_u, mask_g)
            if return_hidden:
                hidden[f"und_hidden.{i}"] = und
                hidden[f"gen_hidden.{i}"] = gen

        gen_o = self.norm_moe_gen(gen)
        pred = self.proj_out(gen_o if nn_tokens == gen_o.shape[1] else gen_o[:, rows])
        vel_noisy = self.unpatchify(pred, len(noisy_frames), hp, wp, h, w)
        if len(noisy_frames) == t and list(noisy_frames) == list(range(t)):
            out = vel_noisy
        else:
            out = torch.zeros(b, c, t, h, w, dtype=vel_noisy.dtype)
            out[:, :, list(noisy_frames)] = vel_noisy
        if return_hidden:
            hidden.update(gen_final_norm=gen_o, packed_pred=pred)
            return out, hidden
        return out


def count_parameters(model, exclude_lm_head=False):
    return sum(p.numel() for n, p in model.named_parameters() if not (exclude_lm_head and n.startswith("lm_head")))
