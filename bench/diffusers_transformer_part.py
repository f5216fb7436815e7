"""The transformer part of bench/diffusers_differential.py: Diffusers' Cosmos3OmniTransformer
(bench/diffusers_reference.py) against `stepmix forward --precision dense --activations f32`.

Each random case is a small config (every constructor key stepmix reads: GQA ratios, head sizes,
rotary axes written as rope_axes_dim or rope_scaling, relu2/silu, the text q/k norm switches, fps
modulation, the mRoPE margin and spatial reset, config files written in full or with defaults left
out), seeded random BF16 weights by the goldens' init rules, and inputs packed by the pipeline's own
_prepare_text_segment and _prepare_vision_segment (conditioned frames, timesteps per token, frame or
clip). Every tenth case is wider (hidden up to 320, head_dim up to 128). Metric: max|a − r| / max|r|
of the velocity; the bound is the goldens' dense bound, 5e-5 (tests/data/golden/cosmos3-tiny/README.md
§9). The README's tighter 5e-6, for an implementation whose rotary inv_freq is bit-exact, does not
hold everywhere: the timestep sinusoid's frequencies come from torch's float32 exp, which is not
correctly rounded, and with timestep_scale 1 the angles reach 10^3 radians, where one ulp of a
frequency moves the sine. Cases past 5e-6 are rerun with correctly rounded frequencies in the
reference (its time_proj output replaced) and both errors reported.
The probes: config changes stepmix refuses by design (features it does not implement, null or
defaulted values the project does not guess), that both refuse, or that must run.
"""
import copy
import json
import math
import os
import random
import shutil
import subprocess
import sys
import zlib

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "training"))
import safetensors_io as st  # noqa: E402
import diffusers_reference as dr  # noqa: E402

BOUND = 5e-5
TIGHT = 5e-6


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def random_config(rng, wide):
    heads = rng.choice([4, 8, 12, 16] if wide else [1, 2, 3, 4, 6, 8])
    head_dim = rng.choice([32, 48, 64, 80, 128] if wide else [2, 4, 6, 8, 10, 12, 16, 20, 24, 32])
    slots = head_dim // 2
    a1, a2 = rng.randint(0, slots // 3), rng.randint(0, slots // 3)
    if wide and head_dim == 128 and rng.random() < 0.5:
        a1 = a2 = 20  # the real checkpoints' [24, 20, 20]
    c = rng.choice([4, 16, 48] if wide else [1, 2, 3, 4, 4, 8, 16])
    p = rng.choice([1, 2, 2] if wide else [1, 2, 2, 2, 3])
    cfg = dict(
        hidden_size=rng.choice([128, 192, 256, 320, 136] if wide else [8, 16, 24, 32, 40, 48, 64, 96]),
        intermediate_size=rng.choice([256, 384, 700, 1024, 513]) if wide else rng.choice([rng.randint(3, 40), rng.randint(40, 192)]),
        num_hidden_layers=rng.randint(1, 3 if wide else 4), num_attention_heads=heads,
        num_key_value_heads=rng.choice(divisors(heads)), head_dim=head_dim,
        vocab_size=rng.randint(50, 1000) if wide else rng.randint(4, 200), latent_channel=c, latent_patch_size=p,
        patch_latent_dim=p * p * c, hidden_act=rng.choice(["silu", "relu2"]),
        qk_norm_for_text=rng.random() < 0.6, use_und_k_norm_for_gen=rng.random() < 0.5,
        attention_bias=rng.random() < 0.3, rope_axes_dim=[slots - a1 - a2, a1, a2])
    if wide:
        cfg.update(rms_norm_eps=rng.choice([1e-6, 1e-5]), rope_theta=rng.choice([5000000.0, 10000.0, 1000000.0]),
                   timestep_scale=0.001, enable_fps_modulation=rng.random() < 0.8, base_fps=24,
                   unified_3d_mrope_temporal_modality_margin=15000, unified_3d_mrope_reset_spatial_ids=True)
        return cfg, dict(rope="axes", json="full")
    cfg.update(
        attention_dropout=rng.choice([0.0, 0.0, 0.1]), rms_norm_eps=rng.choice([1e-6, 1e-6, 1e-5, 1e-3, 0.1]),
        rope_theta=rng.choice([10000.0, 5000000.0, 1000000.0, 500.0, 2.0, 123456.7, 10000]),
        timestep_scale=rng.choice([0.001, 0.001, 1.0, 0.01, 0.0003, 2.5e-4]),
        enable_fps_modulation=rng.random() < 0.7, base_fps=rng.choice([24, 24, 30, 16]),
        unified_3d_mrope_temporal_modality_margin=rng.choice([15000, 15000, 0, 100, 1000000]),
        unified_3d_mrope_reset_spatial_ids=rng.random() < 0.75, dtype=rng.choice(["bfloat16", "float32"]))
    return cfg, dict(rope=rng.choice(["axes", "axes", "scaling", "both"]), json=rng.choice(["full", "full", "minimal"]))


def init_weights(model, seed):
    """The goldens' init rules (README §3), each tensor from its own generator, rounded to BF16."""
    weights = {}
    for name, p in model.state_dict().items():
        g = torch.Generator().manual_seed(seed + zlib.crc32(name.encode()))
        if name.endswith("norm.weight") or (name.count(".") >= 1 and "norm" in name.split(".")[-2]):
            t = 0.75 + 0.5 * torch.rand(p.shape, generator=g)
        elif name.endswith(".bias"):
            t = 0.05 * torch.randn(p.shape, generator=g)
        elif "embed_tokens" in name:
            t = torch.randn(p.shape, generator=g)
        elif p.ndim == 2:
            t = torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1])
        else:
            t = 0.05 * torch.randn(p.shape, generator=g)
        weights[name] = st.round_to_bf16(t.float())
    model.load_state_dict(weights, strict=True)
    return weights


def config_file(model, cfg, style, defaults):
    """The config.json stepmix reads: the registered config, rotary axes as rope_axes_dim, as the
    legacy rope_scaling holder or both, and optionally without the keys that equal the defaults."""
    full = {k: v for k, v in dict(model.config).items() if k != "dtype"}
    full.update(_class_name="Cosmos3OmniTransformer", _diffusers_version="0.40.0.dev0")
    if style["rope"] == "scaling":
        full.pop("rope_axes_dim")
        full["rope_scaling"] = {"rope_type": "default", "mrope_section": list(cfg["rope_axes_dim"]), "mrope_interleaved": True}
    elif style["rope"] == "both":
        full["rope_scaling"] = {"rope_type": "default", "mrope_section": list(cfg["rope_axes_dim"])}
    if style["json"] == "minimal":
        sizes = {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                 "head_dim", "vocab_size", "latent_channel", "latent_patch_size", "patch_latent_dim", "rope_axes_dim"}
        full = {k: v for k, v in full.items() if k in sizes or k.startswith("_") or k not in defaults or defaults[k] != v}
    return dict(sorted(full.items()))


def make_inputs(rng, cfg, model, pipe, wide=False, T=None, H=None, W=None, n_text=None, cond=None, t=None, fps=None):
    """Reference kwargs and stepmix's inputs file, packed by the pipeline's helpers; None = random."""
    T = T or (rng.choice([1, 2, 3]) if wide else rng.choice([1, 1, 2, 3, 4, 5]))
    H = H or (rng.randint(4, 20) if wide else rng.randint(1, 9))
    W = W or (rng.randint(4, 20) if wide else rng.randint(1, 9))
    n_text = n_text or rng.choice([17, 40, 77, 130] if wide else [1, 2, 3, 5, 8, 13, 20])
    vocab = cfg["vocab_size"]
    ids = [rng.randrange(0, max(1, vocab - 2)) for _ in range(n_text - 2)] + [vocab - 2, vocab - 1] if n_text >= 2 \
        else [rng.randrange(0, vocab)]
    fps = fps or rng.choice([24.0, 16.0, 30.0, 10.0, 12.5, 60.0])
    if cond is None:
        mode = "none" if T == 1 else rng.choice(["none", "prefix", "subset"])
        cond = [] if mode == "none" else list(range(rng.randint(1, T - 1))) if mode == "prefix" \
            else sorted(rng.sample(range(T), rng.randint(1, T - 1)))
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    latent = torch.randn((1, cfg["latent_channel"], T, H, W), generator=g, dtype=torch.float32)
    holder = type("Pipe", (), {"transformer": model, "vae_scale_factor_temporal": 4})()
    text = pipe._prepare_text_segment(holder, ids, "cpu")
    vis = pipe._prepare_vision_segment(holder, latent, bool(cond), text["vision_start_temporal_offset"], fps,
                                       text["und_len"], "cpu", condition_frame_indexes=list(cond))
    position_ids = torch.cat([text["text_mrope_ids"], vis["vision_mrope_ids"]], dim=1)
    n_noisy = vis["num_noisy_vision_tokens"]
    hw = vis["vision_token_shapes"][0][1] * vis["vision_token_shapes"][0][2]
    tmode = "fixed" if t is not None else rng.choice(["int_full", "float_full", "per_frame", "per_token", "scalar"])
    if tmode == "int_full":  # an int timestep, passed on as int64 by the pipeline
        vt = vt_file = torch.full((n_noisy,), rng.randint(0, 1000))
    elif tmode == "per_frame":
        vt = vt_file = torch.tensor([rng.uniform(0, 1000) for _ in vis["vision_noisy_frame_indexes"][0].tolist()],
                                    dtype=torch.float32).repeat_interleave(hw)
    elif tmode == "per_token":
        vt = vt_file = torch.rand(n_noisy, generator=g) * 1000
    else:
        value = t if t is not None else rng.uniform(0, 1000)
        vt = torch.full((n_noisy,), value, dtype=torch.float32)
        vt_file = torch.tensor([value], dtype=torch.float32) if tmode == "scalar" else vt
    mask = torch.zeros(T, dtype=torch.int64)
    mask[list(cond)] = 1
    kwargs = dict(input_ids=text["input_ids"], text_indexes=text["text_indexes"], position_ids=position_ids,
                  und_len=text["und_len"], sequence_length=text["und_len"] + vis["num_vision_tokens"],
                  vision_tokens=[latent], vision_token_shapes=vis["vision_token_shapes"],
                  vision_sequence_indexes=vis["vision_sequence_indexes"],
                  vision_mse_loss_indexes=vis["vision_mse_loss_indexes"], vision_timesteps=vt,
                  vision_noisy_frame_indexes=vis["vision_noisy_frame_indexes"], return_dict=False)
    file = {"input_ids": text["input_ids"], "position_ids": position_ids, "vision_latent": latent,
            "vision_timesteps": vt_file, "und_len": torch.tensor(text["und_len"], dtype=torch.int64)}
    if cond or rng.random() < 0.5:
        file["vision_condition_frame_mask"] = mask
    return kwargs, file, dict(T=T, H=H, W=W, text_tokens=n_text, fps=fps, cond=list(cond), timesteps=tmode)


def exact_frequencies(module, inputs, output):
    """time_proj's output with correctly rounded exp frequencies (the float32 exponent as torch forms
    it, exp in float64, rounded once): the reference without its float32 exp."""
    half = module.num_channels // 2
    exponent = -math.log(10000) * torch.arange(0, half, dtype=torch.float32) / (half - module.downscale_freq_shift)
    freqs = torch.exp(exponent.double()).float()
    angle = module.scale * (inputs[0].float()[:, None] * freqs[None])
    emb = torch.cat([torch.sin(angle), torch.cos(angle)], -1)
    return torch.cat([emb[:, half:], emb[:, :half]], -1) if module.flip_sin_to_cos else emb


def reference_velocity(model, kwargs, exact_exp=False):
    hook = model.time_proj.register_forward_hook(exact_frequencies) if exact_exp else None
    try:
        with torch.no_grad():
            return model(**kwargs)[0][0]
    finally:
        if hook:
            hook.remove()


def run_stepmix(binary, folder, config, weights, file):
    os.makedirs(os.path.join(folder, "model"), exist_ok=True)
    with open(os.path.join(folder, "model", "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    st.save(os.path.join(folder, "model", "diffusion_pytorch_model.safetensors"), weights, dtypes={k: "BF16" for k in weights})
    st.save(os.path.join(folder, "in.safetensors"), file)
    out = os.path.join(folder, "out.safetensors")
    p = subprocess.run([binary, "forward", "-m", os.path.join(folder, "model"), "--inputs", os.path.join(folder, "in.safetensors"),
                        "-o", out, "--precision", "dense", "--activations", "f32", "-t", "2"], capture_output=True, text=True)
    if p.returncode != 0:
        return (p.stderr.strip() or p.stdout.strip()).replace(os.path.join(folder, ""), "")
    return st.load(out)[0]["velocity"]


def rel(a, r):
    scale = float(r.abs().max())
    return float((a.float() - r.float()).abs().max()) / (scale if scale > 0 else 1.0) if a.shape == r.shape else math.inf


BASE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, vocab_size=96, latent_channel=4, latent_patch_size=2, patch_latent_dim=16, rope_axes_dim=[4, 2, 2],
            rope_theta=10000.0, timestep_scale=0.001, enable_fps_modulation=True, base_fps=24,
            unified_3d_mrope_temporal_modality_margin=15000, unified_3d_mrope_reset_spatial_ids=True, rms_norm_eps=1e-6,
            hidden_act="silu", qk_norm_for_text=True, use_und_k_norm_for_gen=False, attention_bias=False)


def probes():
    """(label, constructor changes, config-file edit, inputs, what stepmix's refusal must say or None,
    and for a refusal whose reason is Diffusers' result, that premise: "nonfinite")."""
    def drop(key):
        return lambda j: j.pop(key)

    def put(**kv):
        return lambda j: j.update(kv)
    return [
        ("golden-like", {}, None, {}, None),
        ("every frame conditioned", {}, None, dict(T=3, cond=[0, 1, 2]), None),
        ("one text token, 1x1 latent", {}, None, dict(T=2, H=1, W=1, n_text=1), None),
        ("timestep 0", {}, None, dict(t=0.0), None), ("timestep 1000", {}, None, dict(t=1000.0), None),
        ("fps 0.5", {}, None, dict(T=4, fps=0.5), None),
        ("head_dim 128, axes [24,20,20]", dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=1, head_dim=128,
                                                rope_axes_dim=[24, 20, 20], rope_theta=5e6, latent_channel=48,
                                                patch_latent_dim=192, intermediate_size=512), None, {}, None),
        ("relu2, und k norm, bias", dict(hidden_act="relu2", qk_norm_for_text=False, use_und_k_norm_for_gen=True,
                                         attention_bias=True), None, {}, None),
        ("no _class_name", {}, drop("_class_name"), {}, None),
        ("unknown key (warned)", {}, put(my_extra_key=3), {}, None),
        ("rope_theta absent (default 5e6)", dict(rope_theta=5e6), drop("rope_theta"), {}, None),
        ("sound_gen true", dict(sound_gen=True, sound_dim=8), None, {}, "sound generation is not implemented"),
        ("action_gen true", dict(action_gen=True, action_dim=6), None, {}, "action generation is not implemented"),
        ("rope_scaling yarn", dict(rope_scaling={"rope_type": "yarn", "factor": 2.0, "mrope_section": [4, 2, 2]}), None, {},
         "not implemented (accepted: rope_type"),
        ("mrope_section disagrees", dict(rope_scaling={"mrope_section": [2, 3, 3]}), None, {}, "disagrees with rope_axes_dim"),
        ("rope_axes_dim [3,3,3] at head_dim 16", dict(rope_axes_dim=[3, 3, 3]), None, {}, "exceeds head_dim/2"),
        ("attention_bias null", dict(attention_bias=None), None, {}, "expected true or false, got null"),
        ("rms_norm_eps 0", dict(rms_norm_eps=0.0), None, {}, "rms_norm_eps: expected a positive number"),
        ("latent_patch_size absent", {}, drop("latent_patch_size"), {}, "sizes are never defaulted"),
        ("hidden_size 64.0", {}, put(hidden_size=64.0), {}, "hidden_size: expected a positive integer"),
        ("_class_name other", {}, put(_class_name="CosmosTransformer3DModel"), {}, '_class_name: expected "Cosmos3OmniTransformer"'),
        ("rope_theta negative", dict(rope_theta=-10000.0), None, {}, "rope_theta: expected a positive number", "nonfinite"),
        ("heads 6 over 4 kv heads", dict(num_attention_heads=6, num_key_value_heads=4), None, {}, None),
        ("head_dim 15", dict(head_dim=15), None, {}, None),
        ("patch_latent_dim 20", dict(patch_latent_dim=20), None, {}, None),
        ("hidden_act gelu", dict(hidden_act="gelu"), None, {}, None),
    ]


def one_case(tally, args, folder, defaults, pipe, label, cfg, style, rng, weight_seed, inputs, edit=None, expect=None,
             premise=None):
    Transformer = dr.transformer_module().Cosmos3OmniTransformer
    record = {"label": label, "cfg": cfg, "style": style}
    torch.manual_seed(0)
    model, ref, velocity = None, None, None
    try:
        model = Transformer(**cfg).eval()
    except Exception as e:
        ref = f"{type(e).__name__}: {e}"
    if model is None:  # stepmix gets the closest model Diffusers builds, with the change in its file
        built = Transformer(**BASE).eval()
        weights = init_weights(built, weight_seed)
        kwargs, file, record["inputs"] = make_inputs(rng, BASE, built, pipe, **inputs)
        config = config_file(built, BASE, style, defaults)
        config.update({k: v for k, v in cfg.items() if k != "dtype"})
    else:
        weights = init_weights(model, weight_seed)
        kwargs, file, record["inputs"] = make_inputs(rng, cfg, model, pipe, **inputs)
        config = config_file(model, cfg, style, defaults)
        try:
            velocity = reference_velocity(model, kwargs)
        except Exception as e:
            ref = f"{type(e).__name__}: {e}"
    if edit:
        edit(config)
    answer = run_stepmix(args.stepmix, folder, config, weights, file)
    shutil.rmtree(folder, ignore_errors=True)
    row = label if label in ("random", "wide") else "probes"
    if isinstance(answer, str):
        if ref is not None:
            return tally.add(row, "both-refused", record, {"stepmix": answer, "reference": ref})
        designed = bool(expect) and expect in answer and (premise != "nonfinite" or not torch.isfinite(velocity).all())
        return tally.add(row, "refused-as-designed" if designed else "refused-unexpectedly", record,
                         {"stepmix": answer, "by_design": f"{label}: {expect}" if designed else None})
    if ref is not None:
        return tally.add(row, "only-reference-failed", record, {"reference": ref})
    error = rel(answer, velocity)
    tally.worst("velocity", error, record)
    detail = {"velocity_error": error}
    if error > TIGHT:  # the float32 exp caveat, checked rather than assumed
        detail["velocity_error_exact_exp"] = rel(answer, reference_velocity(model, kwargs, exact_exp=True))
        tally.note(f"velocity past {TIGHT:.0e}", detail, record, before=error,
                   against_correctly_rounded_exp=detail["velocity_error_exact_exp"])
    if expect:
        return tally.add(row, "mismatch", record, dict(detail, why="expected a refusal: " + expect))
    tally.add(row, "match" if error <= BOUND else "mismatch", record, detail)


def load(args):
    dr.transformer_module()
    dr.pipeline_helpers()


def run(tally, args, work):
    import inspect
    torch.set_num_threads(1)
    Transformer = dr.transformer_module().Cosmos3OmniTransformer
    defaults = {k: v.default for k, v in inspect.signature(Transformer.__init__.__wrapped__).parameters.items() if k != "self"}
    pipe = dr.pipeline_helpers()["_Pipe"]
    folder = os.path.join(work, "transformer")
    for i, (label, changes, edit, inputs, expect, *premise) in enumerate(probes()):
        cfg = copy.deepcopy(BASE)
        cfg.update(changes)
        one_case(tally, args, folder, defaults, pipe, label, cfg, dict(rope="axes", json="full"), random.Random(7 + i),
                 4242, inputs, edit, expect, *premise)
    for i in range(args.cases):
        rng = random.Random(f"{args.seed}:transformer:{i}")
        wide = i % 10 == 9
        cfg, style = random_config(rng, wide)
        one_case(tally, args, folder, defaults, pipe, "wide" if wide else "random", cfg, style, rng, 1000 + i,
                 dict(wide=wide))
