"""Train the embedded Fashion-MNIST Cosmos3 model (rectified flow, text-conditioned through the
understanding tower).

Flow convention (schedulers.md): x_t = (1 - sigma) * x0 + sigma * eps, the model predicts v = eps - x0,
so the sampler's x0 = x_t - sigma * v. The model receives timestep = sigma * 1000 (it multiplies by
timestep_scale = 0.001). sigma ~ logit-normal(0, 1).

Determinism: every random draw of step k (batch indices, prompts, CFG drops, sigma, noise) comes from a
generator seeded with (seed, k), and the data order of epoch e from (seed, e); so a resumed run equals
an uninterrupted one. The learning rate is constant after warm-up (optionally followed by a linear decay to 0
from --decay-start to --steps), so stopping at step k before the decay gives the same weights as a run
with --steps k.

    nice -n 19 /usr/bin/python3 training/train.py --out training/runs/fashion --steps 6000 --seed 20260901
"""
import argparse
import json
import math
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion  # noqa: E402
from cosmos3 import Cosmos3Transformer, count_parameters, full_config  # noqa: E402

# The embedded model's architecture. Pixel space: latent_channel 1, a 28x28 image is a [1,1,1,28,28]
# latent; patch 4 gives a 7x7 grid of 49 vision tokens.
MODEL_CONFIG = dict(
    hidden_size=192,
    intermediate_size=576,
    num_hidden_layers=6,
    num_attention_heads=6,
    num_key_value_heads=2,
    head_dim=32,
    latent_channel=1,
    latent_patch_size=4,
    patch_latent_dim=16,
    # head_dim 32 -> 16 rotary slots: 6 T, 5 H, 5 W (interleaved THW...). A low theta spreads the
    # frequencies over the short 7-position image axes.
    rope_axes_dim=[6, 5, 5],
    rope_theta=100.0,
    vocab_size=len(fashion.VOCAB),
)


def build_model(seed):
    cfg = full_config(**MODEL_CONFIG)
    model = Cosmos3Transformer(cfg)
    model.init_weights(torch.Generator().manual_seed(seed))
    return model


def step_generator(seed, step):
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


def make_batch(x_all, y_all, seed, step, batch, p_uncond):
    per_epoch = x_all.shape[0] // batch
    epoch, pos = divmod(step, per_epoch)
    perm = torch.randperm(x_all.shape[0], generator=torch.Generator().manual_seed(seed + 7919 * (epoch + 1)))
    idx = perm[pos * batch:(pos + 1) * batch]
    g = step_generator(seed, step)
    x0 = x_all[idx][:, None, None]  # [B, 1, 1, 28, 28]
    y = y_all[idx]
    drop = torch.rand(batch, generator=g) < p_uncond
    choice = torch.randint(0, 1 << 30, (batch,), generator=g)
    ids = []
    for i in range(batch):
        if drop[i]:
            ids.append(fashion.encode(""))
        else:
            prompts = fashion.PROMPTS[int(y[i])]
            ids.append(fashion.encode(prompts[int(choice[i]) % len(prompts)]))
    input_ids, text_len = fashion.batch_ids(ids)
    sigma = torch.sigmoid(torch.randn(batch, generator=g))  # logit-normal(0, 1)
    eps = torch.randn(x0.shape, generator=g)
    return x0, input_ids, text_len, sigma, eps, epoch


def debiased_ema(ck):
    """EMA weights of a checkpoint with the initialisation's share removed (Adam-style bias correction).

    ema_k = b^k * w_0 + (1 - b) * sum_j b^(k-j) * w_j; early in a run b^k is large (0.999^2000 = 0.135), so
    the raw EMA still holds a sizeable fraction of the random initial weights (and of the zero-initialised
    proj_out). The initialisation is a deterministic function of the seed, so it is rebuilt and removed:
    (ema_k - b^k * w_0) / (1 - b^k) is a proper weighted average of the trained iterates.
    """
    args = ck["args"]
    beta_k = args["ema"] ** ck["step"]
    init = build_model(args["seed"]).state_dict()
    return {k: (v - beta_k * init[k]) / (1.0 - beta_k) for k, v in ck["ema"].items()}


def save_checkpoint(path, model, ema, opt, step, args, stats):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "ema": ema, "opt": opt.state_dict(), "step": step,
                "args": vars(args), "stats": stats}, tmp)
    os.replace(tmp, path)  # atomic: an interrupted save never corrupts the last checkpoint


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="training/runs/fashion")
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--decay-start", type=int, default=None,
                    help="linear learning-rate decay to 0 from this step to --steps (default: constant)")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--p-uncond", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=20260901)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ckpt-minutes", type=float, default=5.0)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "last.pt")
    x_all, y_all = fashion.load_split("train")

    model = build_model(args.seed)
    print(f"parameters: {count_parameters(model):,} (without lm_head {count_parameters(model, True):,})",
          flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed_tokens" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed_tokens" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.99))
    ema = {k: v.detach().clone() for k, v in model.state_dict().items()}
    step = 0
    stats = {"train_seconds": 0.0, "images": 0}
    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        model.load_state_dict(ck["model"])
        ema = ck["ema"]
        opt.load_state_dict(ck["opt"])
        step = ck["step"]
        stats = ck["stats"]
        print(f"resumed at step {step}", flush=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(model.cfg, f, indent=2, sort_keys=True)

    # SIGTERM/SIGINT: finish the current step, write a checkpoint and exit, so a run can be stopped at any
    # step and resumed (or exported) without losing work.
    stop = {"flag": False}

    def request_stop(signum, frame):
        stop["flag"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    params = dict(model.named_parameters())
    last_ckpt = time.time()
    window_loss, window_n, window_t0 = 0.0, 0, time.time()
    model.train()
    while step < args.steps:
        lr = args.lr * min(1.0, (step + 1) / args.warmup)
        if args.decay_start is not None and step >= args.decay_start:
            # constant until decay_start, so a run resumed with these flags at any earlier step equals a
            # fresh run with them
            lr *= (args.steps - step) / (args.steps - args.decay_start)
        for group in opt.param_groups:
            group["lr"] = lr
        x0, input_ids, text_len, sigma, eps, epoch = make_batch(x_all, y_all, args.seed, step, args.batch,
                                                                 args.p_uncond)
        s = sigma[:, None, None, None, None]
        x_t = (1.0 - s) * x0 + s * eps
        target = eps - x0
        t0 = time.time()
        pred = model(input_ids, text_len, x_t, sigma * 1000.0)
        loss = F.mse_loss(pred, target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for k, v in ema.items():
                if k in params:
                    v.mul_(args.ema).add_(params[k].detach(), alpha=1.0 - args.ema)
        stats["train_seconds"] += time.time() - t0
        stats["images"] += args.batch
        step += 1
        window_loss += float(loss)
        window_n += 1
        if step % args.log_every == 0 or step == args.steps:
            dt = time.time() - window_t0
            print(json.dumps({"step": step, "epoch": epoch, "loss": round(window_loss / window_n, 5),
                              "lr": lr, "img_per_s": round(window_n * args.batch / dt, 1),
                              "train_minutes": round(stats["train_seconds"] / 60, 2)}), flush=True)
            stats["last_loss"] = window_loss / window_n
            window_loss, window_n, window_t0 = 0.0, 0, time.time()
        if time.time() - last_ckpt > args.ckpt_minutes * 60 or step == args.steps or stop["flag"]:
            stats["last_loss"] = window_loss / window_n if window_n else stats.get("last_loss")
            save_checkpoint(ckpt_path, model, ema, opt, step, args, stats)
            last_ckpt = time.time()
            if stop["flag"]:
                print(json.dumps({"stopped_at_step": step}), flush=True)
                break
    print(json.dumps({"done": step, "train_minutes": round(stats["train_seconds"] / 60, 2),
                      "images_per_s": round(stats["images"] / stats["train_seconds"], 1)}), flush=True)


if __name__ == "__main__":
    main()
