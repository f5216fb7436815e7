"""Export a training checkpoint (debiased EMA or final raw weights) in the Diffusers layout that stepmix loads.

    /usr/bin/python3 training/export.py --ckpt training/runs/fashion/last.pt --weights raw \
        --out models/fashion-cosmos3-bf16 --flow-shift 3.0

Writes model_index.json, transformer/{config.json, diffusion_pytorch_model.safetensors} (BF16, the exact
Diffusers state-dict names), scheduler/scheduler_config.json (UniPC flow, as the golden
unipc_flowshift3.json with the chosen flow_shift) and text_tokenizer/{tokenizer.json,
tokenizer_config.json}. The classifier/ folder and README.md are written by classifier.py and by hand.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion  # noqa: E402
import safetensors_io as st  # noqa: E402
from cosmos3 import Cosmos3Transformer, count_parameters, full_config  # noqa: E402
from train import debiased_ema  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests/data/golden/cosmos3-tiny")


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        # sorted keys, 2-space indent: the way diffusers' ConfigMixin writes configs
        f.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--flow-shift", type=float, default=3.0)
    ap.add_argument("--weights", choices=["ema", "raw"], default="ema",
                    help="debiased EMA weights, or the raw weights at the end of the run")
    args = ap.parse_args()

    ck = torch.load(args.ckpt)
    with open(os.path.join(os.path.dirname(args.ckpt), "config.json")) as f:
        cfg = full_config(**json.load(f))
    with open(os.path.join(GOLDEN, "transformer/config.json")) as f:
        golden_keys = set(json.load(f))
    # exactly the key set diffusers writes (the golden config's), with this model's values
    config = {k: cfg[k] for k in sorted(golden_keys)}
    missing = golden_keys - set(config)
    assert not missing, missing

    # the state dict of the module, so names are the Diffusers ones
    model = Cosmos3Transformer(cfg)
    model.load_state_dict(debiased_ema(ck) if args.weights == "ema" else ck["model"])
    tensors = {k: v.float() for k, v in model.state_dict().items()}
    write_json(os.path.join(args.out, "transformer/config.json"), config)
    st.save(os.path.join(args.out, "transformer/diffusion_pytorch_model.safetensors"), tensors,
            dtypes={k: "BF16" for k in tensors},
            metadata={"format": "pt", "training_step": ck["step"], "weights": args.weights})

    with open(os.path.join(GOLDEN, "scheduler/unipc_flowshift3.json")) as f:
        sched = json.load(f)
    sched["flow_shift"] = args.flow_shift
    write_json(os.path.join(args.out, "scheduler/scheduler_config.json"), sched)

    write_json(os.path.join(args.out, "text_tokenizer/tokenizer.json"), fashion.tokenizer_json())
    write_json(os.path.join(args.out, "text_tokenizer/tokenizer_config.json"), fashion.tokenizer_config_json())

    index = {
        "_class_name": "Cosmos3OmniPipeline",
        "_diffusers_version": "0.40.0.dev0",
        # no chat template and no system prompt: the prefix is the plain prompt + eos + <|vision_start|>
        "default_use_system_prompt": False,
        "enable_safety_checker": False,
        "use_native_flow_schedule": False,
        "scheduler": ["diffusers", "UniPCMultistepScheduler"],
        "text_tokenizer": ["transformers", "PreTrainedTokenizerFast"],
        "transformer": ["diffusers", "Cosmos3OmniTransformer"],
        # pixel space: there is no VAE; the 1x1x28x28 latent is the image in [-1, 1]
        "vae": [None, None],
    }
    # keys added by others (e.g. runtime defaults for stepmix) survive a re-export
    index_path = os.path.join(args.out, "model_index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            existing = json.load(f)
        index = {**existing, **index}
    write_json(index_path, index)
    print(json.dumps({"exported": args.out, "step": ck["step"], "weights": args.weights,
                      "parameters": count_parameters(model),
                      "parameters_without_lm_head": count_parameters(model, True)}))


if __name__ == "__main__":
    main()
