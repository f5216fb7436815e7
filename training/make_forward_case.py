"""Write a single-forward reference case for an exported embedded model, in the golden file layout
(tests/data/golden/cosmos3-tiny/forward/*.safetensors), so `stepmix forward` can be compared with the
PyTorch module on the real model:

    /usr/bin/python3 training/make_forward_case.py --model models/fashion-cosmos3-bf16 \
        --prompt "a photo of a sneaker" --timestep 700 --out /tmp/case.safetensors
    build/stepmix forward --model models/fashion-cosmos3-bf16 --inputs /tmp/case.safetensors --out /tmp/v.safetensors
    /usr/bin/python3 training/make_forward_case.py --compare /tmp/case.safetensors /tmp/v.safetensors
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion  # noqa: E402
import safetensors_io as st  # noqa: E402
from sample import load_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--prompt", default="a photo of a sneaker")
    ap.add_argument("--timestep", type=float, default=700.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs=2, metavar=("CASE", "STEPMIX_OUT"))
    args = ap.parse_args()
    torch.set_num_threads(2)

    if args.compare:
        ref, _ = st.load(args.compare[0])
        got, _ = st.load(args.compare[1])
        g, a = ref["velocity"].double(), got["velocity"].double()
        print(f"max|a-g|/max|g| = {float((a - g).abs().max() / g.abs().max()):.3e}")
        return 0

    model = load_model(args.model)
    ids = torch.tensor(fashion.encode(args.prompt))
    und_len = ids.numel()
    latent = torch.randn(1, 1, 1, 28, 28, generator=torch.Generator().manual_seed(args.seed))
    p = model.cfg["latent_patch_size"]
    grid = (1, -(-28 // p), -(-28 // p))
    nv = grid[0] * grid[1] * grid[2]
    timesteps = torch.full((nv,), args.timestep)
    pos = model.position_ids(torch.tensor([und_len]), und_len, grid)[0]
    with torch.no_grad():
        vel, hid = model(ids[None], torch.tensor([und_len]), latent, timesteps[None], position_ids=pos[None],
                         return_hidden=True)
    tensors = {
        "input_ids": ids, "und_len": torch.tensor(und_len), "sequence_length": torch.tensor(und_len + nv),
        "text_indexes": torch.arange(und_len), "position_ids": pos, "vision_latent": latent,
        "vision_timesteps": timesteps, "vision_token_shapes": torch.tensor(grid),
        "vision_sequence_indexes": torch.arange(und_len, und_len + nv),
        "vision_mse_loss_indexes": torch.arange(und_len, und_len + nv),
        "vision_noisy_frame_indexes": torch.tensor([0]), "vision_condition_frame_mask": torch.tensor([0]),
        "fps": torch.tensor(24.0), "velocity": vel,
        "timestep_embed": hid["timestep_embed"][0], "packed_pred": hid["packed_pred"][0],
    }
    for i in range(model.cfg["num_hidden_layers"]):
        tensors[f"und_hidden.{i}"] = hid[f"und_hidden.{i}"][0]
        tensors[f"gen_hidden.{i}"] = hid[f"gen_hidden.{i}"][0]
    st.save(args.out, tensors, metadata={"prompt": args.prompt, "timestep": args.timestep,
                                         "description": "embedded model, float32 PyTorch on BF16 weights"})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
