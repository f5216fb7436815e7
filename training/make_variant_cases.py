"""Reference velocities for the architecture variants the upstream goldens do not cover.

The goldens of tests/data/golden/cosmos3-tiny are all `hidden_act: silu` with q/k norms on both towers.
This script edits the tiny BF16 checkpoint into the variants exactly as tests/model/checkpoint_variants_test.cpp
does, runs training/cosmos3.py (the module check_against_golden.py holds to the goldens at ~7e-7) in
float32 on a golden forward case, and writes each velocity to tests/data/model-variants/:

  relu2_video.safetensors   hidden_act relu2: squared-ReLU MLPs, gate_proj dropped   (forward case "video")
  undk_image.safetensors    qk_norm_for_text false + use_und_k_norm_for_gen: the understanding keys the
                            generation stream reads are normalised by k_norm_und_for_gen (= the golden norm_k
                            weights), the understanding stream's own q/k are not   (forward case "image")

    /usr/bin/python3 training/make_variant_cases.py [--golden DIR] [--out DIR]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402
from cosmos3 import Cosmos3Transformer, full_config  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def relu2(cfg, weights):
    cfg["hidden_act"] = "relu2"
    return {n: w for n, w in weights.items() if "gate_proj" not in n}


def und_k_norm_for_gen(cfg, weights):
    cfg["qk_norm_for_text"] = False
    cfg["use_und_k_norm_for_gen"] = True
    out = {n: w for n, w in weights.items() if ".norm_q." not in n and ".norm_k." not in n}
    for layer in range(cfg["num_hidden_layers"]):
        out[f"layers.{layer}.self_attn.k_norm_und_for_gen.weight"] = weights[f"layers.{layer}.self_attn.norm_k.weight"]
    return out


VARIANTS = {"relu2_video": (relu2, "video"), "undk_image": (und_k_norm_for_gen, "image")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--golden", default=os.path.join(ROOT, "tests/data/golden/cosmos3-tiny"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/model-variants"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.golden, "transformer/config.json")) as f:
        golden_cfg = json.load(f)
    golden_weights, _ = st.load(os.path.join(args.golden, "transformer/diffusion_pytorch_model.safetensors"))
    for name, (edit, case) in VARIANTS.items():
        cfg = dict(golden_cfg)
        weights = edit(cfg, dict(golden_weights))
        model = Cosmos3Transformer(full_config(**cfg)).eval()
        missing, unexpected = model.load_state_dict(weights, strict=False)
        if missing or unexpected:
            print(f"{name}: state dict: missing {missing} unexpected {unexpected}")
            return 1
        g, _ = st.load(os.path.join(args.golden, "forward", f"{case}.safetensors"))
        und_len = int(g["und_len"])
        with torch.no_grad():
            velocity = model(g["input_ids"][None], torch.tensor([und_len]), g["vision_latent"],
                             g["vision_timesteps"][None], fps=float(g["fps"]),
                             noisy_frames=g["vision_noisy_frame_indexes"].tolist(),
                             position_ids=g["position_ids"][None])
        path = os.path.join(args.out, f"{name}.safetensors")
        st.save(path, {"velocity": velocity}, metadata={
            "description": f"training/make_variant_cases.py: {name} on forward case '{case}', float32"})
        print(f"{path}: velocity {list(velocity.shape)}, max|v| {float(velocity.abs().max()):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
