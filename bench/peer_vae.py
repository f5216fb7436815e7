#!/usr/bin/python3
"""PyTorch eager peer of the stepmix Wan2.2 VAE decoder, for bench/run-vae.sh.

Written from the model's description (docs/vae.md), in the style of the
Diffusers AutoencoderKLWan it describes: post_quant_conv on the whole latent,
then the decoder once per latent frame with one cache per causal convolution
(the last two input frames, concatenated in front of the next chunk and
zero-padded to the kernel), the temporal up-sampling convolution skipped on
frame 0 and started from zeros at frame 1, the duplicate-up shortcuts, and
finally unpatchify and the clamp. Convolutions multiply the full kernel
(zeros of the causal padding included), as the Diffusers class does.

  peer_vae.py make --dir D [--base 256] [--encoder-base 160] [--res-blocks 2] [--seed S]
      seeded random weights (BF16) of a Wan2.2-layout VAE and its config.json
  peer_vae.py latent --out F --frames T --height h --width w [--seed S]
      a seeded normal latent [1, 48, T, h, w] (F32 tensor 'latent')
  peer_vae.py time --dir D --latent F [--repeats N] [--threads 2] [--dtype fp32|bf16]
                   [--device cpu|cuda] [--compare STEPMIX_PIXELS.f32]
      decodes N times, prints one JSON line (wall-clock and CPU ms per decode, and with
      --compare the deviation max|a - b| / max|b| from stepmix's pixels)
"""
import argparse
import json
import math
import struct
import sys
import time

import torch
import torch.nn.functional as F

Z = 48
MEAN = [-0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557, -0.1382, 0.0542, 0.2813, 0.0891,
        0.157, -0.0098, 0.0375, -0.1825, -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
        -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.123, -0.0313, -0.1649, 0.0117, 0.0723,
        -0.2839, -0.2083, -0.052, 0.3748, 0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667]
STD = [0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.499, 0.4818, 0.5013, 0.8158, 1.0344, 0.5894, 1.0901, 0.6885,
       0.6165, 0.8454, 0.4978, 0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659, 0.7069, 0.5338,
       0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093, 0.5709, 0.6065, 0.6415, 0.4944, 0.5726, 1.2042, 0.5458,
       1.6887, 0.3971, 1.06, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744]
DIM_MULT = [1, 2, 4, 4]
TEMPORAL = [False, True, True]


# ---------------------------------------------------------------- safetensors
def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors:
        dtype = {torch.float32: "F32", torch.bfloat16: "BF16"}[t.dtype]
        data = t.contiguous().view(torch.int16 if t.dtype == torch.bfloat16 else torch.int32).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        raw = bytearray(data[8 + n + a:8 + n + b])
        if e["dtype"] == "BF16":
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16).float()
        else:
            t = torch.frombuffer(raw, dtype=torch.float32).clone()
        out[name] = t.reshape(e["shape"])
    return out


# ---------------------------------------------------------------- weights
def model_shapes(base, encoder_base, nrb):
    """Every tensor of the VAE, name -> shape (the checkpoint's module paths)."""
    shapes = {}
    d = [base * DIM_MULT[-1]] + [base * m for m in reversed(DIM_MULT)]
    e = [encoder_base] + [encoder_base * m for m in DIM_MULT]

    def conv(name, o, i, k):
        shapes[name + ".weight"] = [o, i] + k
        shapes[name + ".bias"] = [o]

    def res(prefix, i, o):
        shapes[prefix + ".norm1.gamma"] = [i, 1, 1, 1]
        conv(prefix + ".conv1", o, i, [3, 3, 3])
        shapes[prefix + ".norm2.gamma"] = [o, 1, 1, 1]
        conv(prefix + ".conv2", o, o, [3, 3, 3])
        if i != o:
            conv(prefix + ".conv_shortcut", o, i, [1, 1, 1])

    def mid(prefix, c):
        res(prefix + ".resnets.0", c, c)
        shapes[prefix + ".attentions.0.norm.gamma"] = [c, 1, 1]
        conv(prefix + ".attentions.0.to_qkv", 3 * c, c, [1, 1])
        conv(prefix + ".attentions.0.proj", c, c, [1, 1])
        res(prefix + ".resnets.1", c, c)

    conv("post_quant_conv", Z, Z, [1, 1, 1])
    conv("decoder.conv_in", d[0], Z, [3, 3, 3])
    mid("decoder.mid_block", d[0])
    up_t = list(reversed(TEMPORAL))
    for i in range(len(DIM_MULT)):
        for j in range(nrb + 1):
            res(f"decoder.up_blocks.{i}.resnets.{j}", d[i] if j == 0 else d[i + 1], d[i + 1])
        if i < len(DIM_MULT) - 1:
            if up_t[i]:
                conv(f"decoder.up_blocks.{i}.upsampler.time_conv", 2 * d[i + 1], d[i + 1], [3, 1, 1])
            conv(f"decoder.up_blocks.{i}.upsampler.resample.1", d[i + 1], d[i + 1], [3, 3])
    shapes["decoder.norm_out.gamma"] = [d[-1], 1, 1, 1]
    conv("decoder.conv_out", 12, d[-1], [3, 3, 3])
    conv("encoder.conv_in", e[0], 12, [3, 3, 3])
    for i in range(len(DIM_MULT)):
        for j in range(nrb):
            res(f"encoder.down_blocks.{i}.resnets.{j}", e[i] if j == 0 else e[i + 1], e[i + 1])
        if i < len(DIM_MULT) - 1:
            conv(f"encoder.down_blocks.{i}.downsampler.resample.1", e[i + 1], e[i + 1], [3, 3])
            if TEMPORAL[i]:
                conv(f"encoder.down_blocks.{i}.downsampler.time_conv", e[i + 1], e[i + 1], [3, 1, 1])
    mid("encoder.mid_block", e[-1])
    shapes["encoder.norm_out.gamma"] = [e[-1], 1, 1, 1]
    conv("encoder.conv_out", 2 * Z, e[-1], [3, 3, 3])
    conv("quant_conv", 2 * Z, 2 * Z, [1, 1, 1])
    return shapes


def make(args):
    import os
    os.makedirs(args.dir, exist_ok=True)
    shapes = model_shapes(args.base, args.encoder_base, args.res_blocks)
    tensors = []
    for k, (name, shape) in enumerate(sorted(shapes.items())):
        g = torch.Generator().manual_seed(args.seed * 100003 + k)
        if name.endswith("gamma"):
            t = torch.rand(shape, generator=g) * 0.5 + 0.75
        elif name.endswith("bias"):
            t = 0.05 * torch.randn(shape, generator=g)
        else:
            fan_in = math.prod(shape[1:])
            t = torch.randn(shape, generator=g) / math.sqrt(fan_in)
        tensors.append((name, t.bfloat16()))
    write_safetensors(f"{args.dir}/diffusion_pytorch_model.safetensors", tensors)
    config = {"_class_name": "AutoencoderKLWan", "attn_scales": [], "base_dim": args.encoder_base,
              "decoder_base_dim": args.base, "dim_mult": DIM_MULT, "dropout": 0.0, "in_channels": 12,
              "is_residual": True, "latents_mean": MEAN, "latents_std": STD, "num_res_blocks": args.res_blocks,
              "out_channels": 12, "patch_size": 2, "scale_factor_spatial": 16, "scale_factor_temporal": 4,
              "temperal_downsample": TEMPORAL, "z_dim": Z}
    with open(f"{args.dir}/config.json", "w") as f:
        json.dump(config, f, indent=2)
    print(f"{sum(math.prod(s) for s in shapes.values())} parameters -> {args.dir}", file=sys.stderr)


def latent(args):
    g = torch.Generator().manual_seed(args.seed)
    write_safetensors(args.out, [("latent", torch.randn([1, Z, args.frames, args.height, args.width], generator=g))])


# ---------------------------------------------------------------- decoder
class Decoder:
    def __init__(self, w, dtype, device="cpu"):
        self.w = {k: v.to(device, dtype) for k, v in w.items() if k.startswith("decoder.") or k.startswith("post_quant")}
        self.dtype = dtype
        self.device = device
        self.nrb = sum(1 for k in self.w if k.startswith("decoder.up_blocks.0.resnets.") and k.endswith("norm1.gamma")) - 1
        self.levels = len(DIM_MULT)

    # Causal conv with the Diffusers cache rule: the cache keeps the last two
    # frames this conv received; the input is cache ++ chunk, zero-padded in
    # front to kt - 1 frames of history.
    def causal(self, name, x, cache, padding=True):
        wt, b = self.w[name + ".weight"], self.w[name + ".bias"]
        kt, kh, kw = wt.shape[2:]
        pad_t = kt - 1
        old = cache.get(name)
        if kt > 1:
            new = x[:, :, -2:].clone()
            if new.shape[2] < 2 and old is not None:
                new = torch.cat([old[:, :, -1:], new], 2)
        if old is not None and pad_t > 0:
            x = torch.cat([old, x], 2)
            pad_t -= old.shape[2]
        x = F.pad(x, (kw // 2, kw // 2, kh // 2, kh // 2, pad_t, 0))
        y = F.conv3d(x, wt, b)
        if kt > 1:
            cache[name] = new
        return y

    def norm(self, name, x):
        c = x.shape[1]
        return F.normalize(x, dim=1) * (c ** 0.5) * self.w[name]

    def resnet(self, p, x, cache):
        h = self.causal(p + ".conv_shortcut", x, cache) if p + ".conv_shortcut.weight" in self.w else x
        x = self.causal(p + ".conv1", F.silu(self.norm(p + ".norm1.gamma", x)), cache)
        x = self.causal(p + ".conv2", F.silu(self.norm(p + ".norm2.gamma", x)), cache)
        return x + h

    def attention(self, p, x):
        identity = x
        b, c, t, h, w = x.shape
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        x = self.norm(p + ".norm.gamma", x)
        qkv = F.conv2d(x, self.w[p + ".to_qkv.weight"], self.w[p + ".to_qkv.bias"])
        qkv = qkv.reshape(b * t, 1, c * 3, -1).permute(0, 1, 3, 2).contiguous()
        q, k, v = qkv.chunk(3, dim=-1)
        x = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(c)), dim=-1) @ v
        x = x.squeeze(1).permute(0, 2, 1).reshape(b * t, c, h, w)
        x = F.conv2d(x, self.w[p + ".proj.weight"], self.w[p + ".proj.bias"])
        return x.view(b, t, c, h, w).permute(0, 2, 1, 3, 4) + identity

    def upsample(self, p, x, cache, temporal):
        b, c, t, h, w = x.shape
        if temporal:
            key = p + ".time_conv"
            if key not in cache:
                cache[key] = "Rep"  # frame 0: no time conv
            else:
                first = cache[key] == "Rep"
                if first:
                    del cache[key]
                x = self.causal(key, x, cache)
                x = x.reshape(b, 2, c, t, h, w)
                x = torch.stack((x[:, 0], x[:, 1]), 3).reshape(b, c, t * 2, h, w)
        t = x.shape[2]
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        x = F.conv2d(x, self.w[p + ".resample.1.weight"], self.w[p + ".resample.1.bias"], padding=1)
        return x.view(b, t, c, 2 * h, 2 * w).permute(0, 2, 1, 3, 4)

    @staticmethod
    def dup_up(x, out_c, ft, fs, first):
        b, in_c, t, h, w = x.shape
        factor = ft * fs * fs
        x = x.repeat_interleave(out_c * factor // in_c, dim=1)
        x = x.view(b, out_c, ft, fs, fs, t, h, w).permute(0, 1, 5, 2, 6, 3, 7, 4).contiguous()
        x = x.view(b, out_c, t * ft, h * fs, w * fs)
        return x[:, :, ft - 1:] if first else x

    def chunk(self, x, cache, first):
        x = self.causal("decoder.conv_in", x, cache)
        x = self.resnet("decoder.mid_block.resnets.0", x, cache)
        x = self.attention("decoder.mid_block.attentions.0", x)
        x = self.resnet("decoder.mid_block.resnets.1", x, cache)
        up_t = list(reversed(TEMPORAL))
        for i in range(self.levels):
            p = f"decoder.up_blocks.{i}"
            copy = x
            for j in range(self.nrb + 1):
                x = self.resnet(f"{p}.resnets.{j}", x, cache)
            if i < self.levels - 1:
                x = self.upsample(p + ".upsampler", x, cache, up_t[i])
                x = x + self.dup_up(copy, x.shape[1], 2 if up_t[i] else 1, 2, first)
        x = F.silu(self.norm("decoder.norm_out.gamma", x))
        return self.causal("decoder.conv_out", x, cache)

    def decode(self, latent):
        mean = torch.tensor(MEAN, dtype=torch.float32, device=self.device).view(1, -1, 1, 1, 1)
        inv_std = (1.0 / torch.tensor(STD, dtype=torch.float32, device=self.device)).view(1, -1, 1, 1, 1)
        z = (latent / inv_std + mean).to(self.dtype)
        z = F.conv3d(z, self.w["post_quant_conv.weight"], self.w["post_quant_conv.bias"])
        cache, out = {}, []
        for i in range(z.shape[2]):
            out.append(self.chunk(z[:, :, i:i + 1], cache, i == 0))
        x = torch.cat(out, 2)
        b, c, f, h, w = x.shape
        x = x.view(b, c // 4, 2, 2, f, h, w).permute(0, 1, 4, 5, 3, 6, 2).contiguous().view(b, c // 4, f, h * 2, w * 2)
        return torch.clamp(x, -1.0, 1.0)


def time_decode(args):
    torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    decoder = Decoder(read_safetensors(f"{args.dir}/diffusion_pytorch_model.safetensors"), dtype, args.device)
    z = read_safetensors(args.latent)["latent"].to(args.device)
    ms, cpu_ms, pixels = [], [], None
    on_gpu = args.device == "cuda"
    with torch.no_grad():
        for _ in range(args.repeats):
            start, cpu_start = time.perf_counter(), time.process_time()
            pixels = decoder.decode(z)
            if on_gpu:
                torch.cuda.synchronize()
            ms.append((time.perf_counter() - start) * 1e3)
            cpu_ms.append((time.process_time() - cpu_start) * 1e3)
    result = {"shape": list(z.shape), "dtype": args.dtype, "ms": [round(m, 1) for m in ms],
              "cpu_ms": [round(m, 1) for m in cpu_ms],
              "torch": torch.__version__, "threads": args.threads, "device": args.device}
    if on_gpu:
        result["peak_gpu_bytes"] = torch.cuda.max_memory_allocated()
    pixels = pixels.cpu()
    if args.compare:
        ours = torch.frombuffer(bytearray(open(args.compare, "rb").read()), dtype=torch.float32).reshape(pixels.shape)
        result["deviation_vs_stepmix"] = float((pixels.float() - ours).abs().max() / ours.abs().max())
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--dir", required=True)
    m.add_argument("--base", type=int, default=256)
    m.add_argument("--encoder-base", type=int, default=160)
    m.add_argument("--res-blocks", type=int, default=2)
    m.add_argument("--seed", type=int, default=1)
    la = sub.add_parser("latent")
    la.add_argument("--out", required=True)
    for k in ("frames", "height", "width"):
        la.add_argument("--" + k, type=int, required=True)
    la.add_argument("--seed", type=int, default=7)
    t = sub.add_parser("time")
    t.add_argument("--dir", required=True)
    t.add_argument("--latent", required=True)
    t.add_argument("--repeats", type=int, default=1)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    t.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    t.add_argument("--compare")
    args = parser.parse_args()
    {"make": make, "latent": latent, "time": time_decode}[args.command](args)


if __name__ == "__main__":
    main()
