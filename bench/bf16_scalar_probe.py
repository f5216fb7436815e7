#!/usr/bin/env python3
"""How this PyTorch applies a scalar coefficient to a BF16 tensor: rounded to
BF16 first ("narrowed") or as the float32 it is. The Diffusers schedulers
multiply BF16 latents by 0-d float32 CPU tensors (sigmas and their ratios) and
the CFG combination by a Python float; stepmix's BF16 emulation
(--bf16-latents, src/sched/rounding.hpp) narrows them, as PyTorch 1.13 does on
the CPU. Run on the GPU machine by bench/cuda-device-check.sh, on its CUDA
device when it has one, to say whether PyTorch there does the same.

Prints one line: for each of mul, add, div by a 0-d float32 CPU tensor and mul
by a Python float, "narrowed", "float32", "both" (the two agree on the sample)
or "neither".
"""
import torch


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=g).to(torch.bfloat16).to(device)
    c = 0.96778357  # sigma_1 of 35 UniPC steps at flow shift 10: not a BF16 value
    s = torch.tensor(c, dtype=torch.float32)
    narrow, exact, xf = float(s.to(torch.bfloat16)), float(s), x.float()

    def kind(got, op):
        n = torch.equal(got, op(xf, narrow).to(torch.bfloat16))
        e = torch.equal(got, op(xf, exact).to(torch.bfloat16))
        return "both" if n and e else "narrowed" if n else "float32" if e else "neither"

    results = {
        "mul": kind(x * s, lambda a, b: a * b),
        "add": kind(x + s, lambda a, b: a + b),
        "div": kind(x / s, lambda a, b: a / b),
        "mul_python_float": kind(x * c, lambda a, b: a * b),
    }
    print(f"torch {torch.__version__} on {device}: a BF16 tensor and a float32 scalar:",
          " ".join(f"{k} {v}" for k, v in results.items()))


if __name__ == "__main__":
    main()
