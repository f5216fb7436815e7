"""Fashion-MNIST classifier used to rate generated samples.

A plain MLP over the 784 pixels (in [-1, 1], row-major) so that C++ tools can run it with three matrix
products: linear(784->256) ReLU linear(256->128) ReLU linear(128->10). Saved as float32 safetensors plus a
JSON description of the layers.

    nice -n 19 /usr/bin/python3 training/classifier.py --out models/fashion-cosmos3-bf16/classifier --seed 7
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion  # noqa: E402
import safetensors_io as st  # noqa: E402

LAYERS = [("fc1", 784, 256), ("fc2", 256, 128), ("fc3", 128, 10)]


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (nn.Linear(i, o) for _, i, o in LAYERS)

    def forward(self, x):
        x = x.reshape(x.shape[0], -1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def load(directory):
    """Load a saved classifier (for the sampler's evaluation)."""
    tensors, _ = st.load(os.path.join(directory, "classifier.safetensors"))
    model = MLP()
    model.load_state_dict(tensors)
    return model.eval()


def accuracy(model, x, y, batch=1000):
    with torch.no_grad():
        pred = torch.cat([model(x[i:i + batch]).argmax(-1) for i in range(0, x.shape[0], batch)])
    return float((pred == y).float().mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x, y = fashion.load_split("train")
    xt, yt = fashion.load_split("test")
    model = MLP()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.epochs * (x.shape[0] // 128))
    g = torch.Generator().manual_seed(args.seed)
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(x.shape[0], generator=g)
        for i in range(0, x.shape[0] - 127, 128):
            idx = perm[i:i + 128]
            xb = x[idx]
            # light pixel noise: generated samples are never exactly dataset images
            xb = (xb + 0.05 * torch.randn(xb.shape, generator=g)).clamp(-1, 1)
            loss = F.cross_entropy(model(xb), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        model.eval()
        print(json.dumps({"epoch": epoch + 1, "test_accuracy": round(accuracy(model, xt, yt), 4)}), flush=True)
    acc = accuracy(model, xt, yt)
    os.makedirs(args.out, exist_ok=True)
    st.save(os.path.join(args.out, "classifier.safetensors"),
            {k: v for k, v in model.state_dict().items()}, metadata={"test_accuracy": f"{acc:.4f}"})
    desc = {
        "task": "Fashion-MNIST classification",
        "input": {"shape": [28, 28], "layout": "row-major, flattened to 784", "range": [-1.0, 1.0],
                  "mapping": "pixel/127.5 - 1 (0 = black background -> -1)"},
        "layers": [
            {"type": "linear", "weight": "fc1.weight", "bias": "fc1.bias", "in": 784, "out": 256},
            {"type": "relu"},
            {"type": "linear", "weight": "fc2.weight", "bias": "fc2.bias", "in": 256, "out": 128},
            {"type": "relu"},
            {"type": "linear", "weight": "fc3.weight", "bias": "fc3.bias", "in": 128, "out": 10},
        ],
        "output": "logits; argmax = class index",
        "classes": fashion.CLASSES,
        "weights_dtype": "F32",
        "linear": "y = x @ weight^T + bias (weight is [out, in])",
        "test_accuracy": round(acc, 4),
        "training": f"/usr/bin/python3 training/classifier.py --out <dir> --seed {args.seed} --epochs {args.epochs}",
    }
    with open(os.path.join(args.out, "classifier.json"), "w") as f:
        json.dump(desc, f, indent=2)
    print(json.dumps({"test_accuracy": acc, "saved": args.out}))


if __name__ == "__main__":
    main()
