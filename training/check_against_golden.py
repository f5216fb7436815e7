"""Check training/cosmos3.py against the upstream reference forwards in tests/data/golden/cosmos3-tiny.

Loads the tiny BF16 checkpoint (strict: every tensor name must match the module), runs every single-forward
case of forward/*.safetensors in float32 and compares velocity, per-layer hidden states and the
intermediate tensors with max|a - g| / max|g|. This proves the tensor names, config semantics and ops are
those stepmix implements, so a model trained with this module is a valid Cosmos3 checkpoint.

    /usr/bin/python3 training/check_against_golden.py [--golden DIR] [--tol 1e-5]
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


def rel(a, g):
    g = g.double()
    return float((a.double() - g).abs().max() / g.abs().max().clamp_min(1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--golden", default=os.path.join(ROOT, "tests/data/golden/cosmos3-tiny"))
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    torch.set_num_threads(2)

    with open(os.path.join(args.golden, "transformer/config.json")) as f:
        cfg_file = json.load(f)
    cfg = full_config(**{k: v for k, v in cfg_file.items()})
    model = Cosmos3Transformer(cfg).eval()
    weights, _ = st.load(os.path.join(args.golden, "transformer/diffusion_pytorch_model.safetensors"))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        print(f"FAIL state dict: missing {missing} unexpected {unexpected}")
        return 1
    print(f"state dict: {len(weights)} tensors, names match the module exactly")

    worst = 0.0
    failures = 0
    for case in ("image", "video", "odd", "cond"):
        path = os.path.join(args.golden, "forward", f"{case}.safetensors")
        if not os.path.exists(path):
            continue
        g, meta = st.load(path)
        ids = g["input_ids"][None]
        und_len = int(g["und_len"])
        noisy = g["vision_noisy_frame_indexes"].tolist()
        fps = float(g["fps"])
        latent = g["vision_latent"]
        grid = tuple(g["vision_token_shapes"].tolist())
        with torch.no_grad():
            built_pos = model.position_ids(torch.tensor([und_len]), und_len, grid, fps)[0]
            vel, hid = model(ids, torch.tensor([und_len]), latent, g["vision_timesteps"][None], fps=fps,
                             noisy_frames=noisy, position_ids=g["position_ids"][None], return_hidden=True)
        checks = {
            "position_ids (built by the pipeline rules)": (built_pos, g["position_ids"]),
            "rope.inv_freq": (model.inv_freq, g["rope.inv_freq"]),
            "rope.cos": (hid["rope_cos"][0], g["rope.cos"]),
            "rope.sin": (hid["rope_sin"][0], g["rope.sin"]),
            "vision_proj_in": (hid["vision_proj_in"][0], g["vision_proj_in"]),
            "timestep_embed": (hid["timestep_embed"][0], g["timestep_embed"]),
            "und_embed": (hid["und_embed"][0], g["und_embed"]),
            "gen_embed": (hid["gen_embed"][0], g["gen_embed"]),
            "gen_final_norm": (hid["gen_final_norm"][0], g["gen_final_norm"]),
            "packed_pred": (hid["packed_pred"][0], g["packed_pred"]),
            "velocity": (vel, g["velocity"]),
        }
        for i in range(cfg["num_hidden_layers"]):
            checks[f"und_hidden.{i}"] = (hid[f"und_hidden.{i}"][0], g[f"und_hidden.{i}"])
            checks[f"gen_hidden.{i}"] = (hid[f"gen_hidden.{i}"][0], g[f"gen_hidden.{i}"])
        print(f"[{case}] {meta.get('description', '')}: latent {list(latent.shape)}, und_len {und_len}, "
              f"noisy frames {noisy}, timestep {meta.get('timestep')}")
        for name, (a, b) in checks.items():
            if tuple(a.shape) != tuple(b.shape):
                print(f"  FAIL {name}: shape {tuple(a.shape)} vs golden {tuple(b.shape)}")
                failures += 1
                continue
            r = rel(a, b)
            worst = max(worst, r)
            ok = r <= args.tol
            failures += not ok
            print(f"  {'ok  ' if ok else 'FAIL'} {name:45s} {r:.2e}")
    # The training path batches prompts of different lengths, right-padded and masked. It must give each
    # sample exactly what an unpadded single call gives.
    g, _ = st.load(os.path.join(args.golden, "forward", "image.safetensors"))
    ids, lat, ts = g["input_ids"], g["vision_latent"], g["vision_timesteps"][:1]
    short = ids[4:]
    batch_ids = torch.zeros(2, ids.numel(), dtype=torch.long)
    batch_ids[0] = ids
    batch_ids[1, :short.numel()] = short
    with torch.no_grad():
        both = model(batch_ids, torch.tensor([ids.numel(), short.numel()]), torch.cat([lat, lat]),
                     torch.cat([ts, ts]))
        alone = model(short[None], torch.tensor([short.numel()]), lat, ts)
        full = model(ids[None], torch.tensor([ids.numel()]), lat, ts)
    r = max(rel(both[1:], alone), rel(both[:1], full))
    worst = max(worst, r)
    failures += r > args.tol
    print(f"[padded batch] {'ok  ' if r <= args.tol else 'FAIL'} padded+masked vs unpadded calls {r:.2e}")
    print(f"worst max|a-g|/max|g| = {worst:.2e} (tolerance {args.tol:.0e}); "
          f"{'PASS' if failures == 0 else f'{failures} FAILURES'}")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
