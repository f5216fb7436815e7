"""Reference trajectories of scheduler settings the upstream goldens do not cover, from Diffusers' own code.

Runs Diffusers' UniPCMultistepScheduler (loaded from a Diffusers checkout by diffusers_schedulers.py) in
float32 on a closed loop with a toy model, v_k = 0.9·x − 0.5·cos(0.01·t_k) + 0.1·ε_k, and writes
tests/data/scheduler-variants/<case>.safetensors:

  sample            F32 [1, 4, 2, 4, 4]   the initial latent
  model_output.<k>  F32                   the model output fed to step k (replayed by the test)
  sample.<k>        F32                   the latent after step k
  sigmas            F32 [N + 1], timesteps I64 [N]
  metadata: "config" (the scheduler_config.json), "steps" (N), "native_grid" ("1" when the pipeline's
  use_native_flow_schedule grid was passed as sigmas)

    /usr/bin/python3 training/make_scheduler_variant_cases.py --diffusers /path/to/diffusers [--out DIR]

The cases were written from Diffusers at 58eb52c0803ea9af3abec60841c2a093bdf1f951, the goldens' commit.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffusers_schedulers as ds  # noqa: E402
import safetensors_io as st  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = {"_class_name": "UniPCMultistepScheduler", "num_train_timesteps": 1000, "prediction_type": "flow_prediction",
        "use_flow_sigmas": True, "flow_shift": 10.0, "solver_order": 2, "solver_type": "bh2", "predict_x0": True,
        "lower_order_final": True, "final_sigmas_type": "zero", "disable_corrector": []}

# name: (config changes, steps, native grid)
CASES = {
    # The corrector skipped at steps 2 and 4 (k − 1 listed); 100 names no step.
    "unipc_disable_corrector": ({"disable_corrector": [1, 3, 100]}, 8, False),
    # Diffusers' constructor runs "midpoint" as bh2.
    "unipc_solver_type_midpoint": ({"solver_type": "midpoint"}, 6, False),
    # Order 1 does not lower its last step: lower_order_final false changes nothing.
    "unipc_order1_no_lower_order_final": ({"solver_order": 1, "lower_order_final": False}, 6, False),
    # The native grid with T·s above 10^6: the 1e-6 nudge of sigma 0 applies to it as well.
    "unipc_native_grid_nudged": ({"num_train_timesteps": 1000000}, 4, True),
}


def run(config, steps, native_grid):
    torch.manual_seed(0)
    scheduler = ds.from_config(config)
    if native_grid:
        T = config["num_train_timesteps"]
        scheduler.set_timesteps(steps, sigmas=np.linspace(1.0 - 1.0 / T, 0.0, steps + 1)[:-1])
    else:
        scheduler.set_timesteps(steps)
    x = torch.randn(1, 4, 2, 4, 4, dtype=torch.float32)
    out = {"sample": x.clone(), "sigmas": scheduler.sigmas.to(torch.float32).clone(),
           "timesteps": scheduler.timesteps.to(torch.int64).clone()}
    for k, t in enumerate(scheduler.timesteps):
        eps = torch.randn(x.shape, dtype=torch.float32)
        v = (0.9 * x - 0.5 * math.cos(0.01 * float(t)) + 0.1 * eps).to(torch.float32)
        x = scheduler.step(v, t, x, return_dict=False)[0]
        out[f"model_output.{k}"] = v
        out[f"sample.{k}"] = x.clone()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--diffusers", required=True, help="a Diffusers checkout (its root folder)")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "scheduler-variants"))
    args = ap.parse_args()
    ds.load(args.diffusers)
    torch.set_num_threads(1)
    for name, (changes, steps, native_grid) in CASES.items():
        config = dict(BASE, **changes)
        tensors = run(config, steps, native_grid)
        dtypes = {"timesteps": "I64"}
        meta = {"config": json.dumps(config, sort_keys=True), "steps": steps, "native_grid": int(native_grid)}
        path = os.path.join(args.out, name + ".safetensors")
        st.save(path, tensors, dtypes, metadata=meta)
        print(name, "timesteps", tensors["timesteps"].tolist(), "->", path)


if __name__ == "__main__":
    main()
