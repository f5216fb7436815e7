"""The scheduler part of bench/diffusers_differential.py: Diffusers' UniPCMultistepScheduler and
FlowMatchEulerDiscreteScheduler files (training/diffusers_schedulers.py) against stepmix's schedulers
(the bench_scheduler_replay harness, bench/scheduler_replay.cpp), in float32.

Each case is a scheduler_config.json, a step count and the pipeline's overrides. The reference runs a
closed loop with a toy model, v_k = a·x − b·cos(0.01·t_k) + c·ε_k, from step index 0
(set_begin_index(0), as stepmix starts), and records every v_k and the noise of stochastic steps;
stepmix replays them from the same latent, so the trajectories differ only by the schedulers' own
arithmetic. Expected:
- sigmas and timesteps bit for bit, both schedulers;
- FlowMatch Euler latents bit for bit (the same float32 operations in the same order);
- UniPC latents within UNIPC_BOUND of their size: Diffusers computes the scalar coefficients as
  float32 tensors (log, expm1, linalg.solve), stepmix in float64 rounded once, so the latents part by
  about 3e-7 (a differential run over 2,000 random flow-grid configurations: 99th percentile 4.3e-6,
  worst 1.4e-5). Past
  the bound a case still agrees when stepmix is no farther than Diffusers from Diffusers' own
  scheduler run in float64 on the same float32 sigmas and model outputs: where consecutive sigmas
  nearly coincide, the reference's float32 log-SNR step loses most of its digits.
Random families: the flow grid, Karras sigmas, the pipeline's native grid and overrides, FlowMatch with
and without t_list or set_sigmas, each with the settings UniPC reads at random: disable_corrector
lists, solver_type midpoint/heun/logrho (run as bh2), lower_order_final false with order 1,
rescale_betas_zero_snr and the beta tables, the 1e-6 nudge on the native grid (T·shift past 10^6),
and schedules whose float32 sigmas repeat or start at 1 (refused).
"""
import copy
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "training"))
import diffusers_schedulers as ds  # noqa: E402

UNIPC_BOUND = 2e-5
UNIPC = {"_class_name": "UniPCMultistepScheduler", "_diffusers_version": "0.40.0.dev0",
         "prediction_type": "flow_prediction", "use_flow_sigmas": True}
FM = {"_class_name": "FlowMatchEulerDiscreteScheduler"}
FAMILIES = ["unipc_flow", "unipc_karras", "unipc_native", "unipc_pipeline_overrides", "unipc_refused",
            "fm_default", "fm_t_list", "fm_set_sigmas"]

# Refusals of random configurations that are by design, each counted only while its premise holds
# in the reference's own run: (text in stepmix's message, premise, what the premise says).
EXPECTED = [
    ("lower_order_final: expected true", lambda r, c: r["nonfinite"] > 0,
     "order 2 to a final sigma of 0 divides by zero: Diffusers' latent is not finite"),
    ('"bh1"', lambda r, c: c["cfg"].get("solver_type") == "bh1", "solver_type bh1 is not implemented"),
    ("the schedule starts at sigma 0", lambda r, c: r["sigmas"][0] >= 1.0,
     "Diffusers' float32 sigma 0 is 1, where the log-SNR is infinite"),
    ("have the same float32 log-SNR", lambda r, c: r["nonfinite"] > 0 or _float32_lambdas_coincide(r["sigmas"]),
     "Diffusers' float32 log-SNRs of two neighbouring sigmas coincide, so a step divides by 0"),
]


def _float32_lambdas_coincide(sigmas):
    """Whether Diffusers' log-SNRs, log(1 - s) - log(s) on float32 tensors, fail to increase."""
    s = torch.tensor(np.asarray(sigmas[:-1], dtype=np.float32))
    lam = torch.log(1 - s) - torch.log(s)
    return bool((lam[1:] <= lam[:-1]).any())


# ---- random configurations ---------------------------------------------------------------------------

def rand_T(rng):
    r = rng.random()
    if r < 0.35:
        return 1000
    if r < 0.5:
        return int(rng.choice([2, 3, 4, 5, 7, 10, 11]))
    if r < 0.85:
        return int(rng.integers(2, 5000))
    return int(rng.choice([999, 1001, 1024, 4096, 10000, 100000, 1000000]))


def rand_shift(rng):
    r = rng.random()
    if r < 0.25:
        return float(rng.choice([1.0, 3.0, 5.0, 10.0, 17.0, 0.01, 1000.0, 0.5, 2.0, 7.0]))
    if r < 0.35:
        return int(rng.choice([1, 2, 3, 5, 10, 12, 100]))  # a JSON integer
    return float(np.exp(rng.uniform(math.log(0.01), math.log(1000.0))))


def rand_N(rng):
    return int(rng.choice([1, 2, 3])) if rng.random() < 0.15 else int(rng.integers(1, 61))


def unipc_fields(rng, cfg):
    """Fields that change nothing on the supported path, or the settings taken up since, at random."""
    order = int(rng.choice([1, 2, 2]))
    cfg["solver_order"] = order
    pool = {
        "timestep_spacing": lambda: str(rng.choice(["linspace", "leading", "trailing"])),
        "steps_offset": lambda: int(rng.integers(0, 5)),
        "beta_start": lambda: float(rng.uniform(1e-5, 1e-3)),
        "beta_end": lambda: float(rng.uniform(0.01, 0.03)),
        "beta_schedule": lambda: str(rng.choice(["linear", "scaled_linear", "squaredcos_cap_v2"])),
        "dynamic_thresholding_ratio": lambda: 0.995,
        "sample_max_value": lambda: float(rng.choice([1.0, 2.0])),
        "time_shift_type": lambda: str(rng.choice(["exponential", "linear"])),
        "sigma_min": lambda: float(rng.choice([0.147, 0.002])),
        "sigma_max": lambda: float(rng.choice([200.0, 80.0])),
        "final_sigmas_type": lambda: "zero",
        "predict_x0": lambda: True,
        "thresholding": lambda: False,
        "use_karras_sigmas": lambda: False,
        "use_exponential_sigmas": lambda: False,
        "use_beta_sigmas": lambda: False,
        "use_dynamic_shifting": lambda: False,
        "shift_terminal": lambda: None,
        "solver_p": lambda: None,
        "solver_type": lambda: str(rng.choice(["bh2", "midpoint", "heun", "logrho"])),
        "lower_order_final": lambda: True if order == 2 else bool(rng.random() < 0.5),
        "rescale_betas_zero_snr": lambda: bool(rng.random() < 0.5),
        "disable_corrector": lambda: sorted(set(int(k) for k in rng.integers(0, 64, int(rng.integers(0, 5))))),
    }
    for key, make in pool.items():
        if rng.random() < 0.5:
            cfg[key] = make()
    if rng.random() < 0.15:  # a table of its own: then any beta_schedule name goes
        cfg["trained_betas"] = [round(float(b), 6) for b in rng.uniform(1e-4, 0.02, int(rng.integers(1, 9)))]
        cfg["beta_schedule"] = str(rng.choice(["linear", "custom"]))
    return cfg


def fm_fields(rng, cfg):
    pool = {"base_shift": 0.5, "max_shift": 1.15, "base_image_seq_len": 256, "max_image_seq_len": 4096,
            "invert_sigmas": False, "shift_terminal": None, "use_karras_sigmas": False,
            "use_exponential_sigmas": False, "use_beta_sigmas": False, "use_dynamic_shifting": False}
    for key, value in pool.items():
        if rng.random() < 0.5:
            cfg[key] = value
    if rng.random() < 0.5:
        cfg["time_shift_type"] = str(rng.choice(["exponential", "linear"]))
    return cfg


def sigma_list(rng, most, with_one):
    values = sorted(set(float(v) for v in rng.uniform(0.0, 1.0, int(rng.integers(1, most))) if v > 0), reverse=True)
    return [1.0] + [v for v in values if v < 1.0] if with_one else values


def random_case(family, rng):
    """A case: cfg (stepmix's file), N, overrides (stepmix's), ref_cfg, ref_sigmas, stochastic."""
    case = {"family": family, "overrides": None, "ref_sigmas": None, "stochastic": False}
    if family.startswith("unipc"):
        cfg = unipc_fields(rng, dict(UNIPC))
        cfg["num_train_timesteps"] = rand_T(rng)
        cfg["flow_shift"] = rand_shift(rng)
        N = rand_N(rng)
        if family == "unipc_karras":
            cfg.update(use_karras_sigmas=True, flow_shift=1.0 if rng.random() < 0.7 else 1)
            smin = float(np.exp(rng.uniform(math.log(1e-4), math.log(10.0))))
            r = rng.random()
            if r < 0.15:
                smin, smax = 0.147, 200.0
            elif r < 0.25:  # float32 sigmas that repeat or reach 1: refused
                smax = float(10 ** rng.uniform(6, 10))
            elif r < 0.35:  # nearly coinciding sigmas: Diffusers' float32 log-SNR step loses digits
                smax = smin * (1 + float(10 ** rng.uniform(-7, -1)))
            else:
                smax = float(smin * np.exp(rng.uniform(math.log(1.01), math.log(1e5))))
            cfg["sigma_min"], cfg["sigma_max"] = smin, smax
        elif family == "unipc_native":
            cfg["use_karras_sigmas"] = False
            if rng.random() < 0.3:  # T·shift past 10^6: sigma 0 comes within 1e-6 of 1 and is nudged
                cfg["num_train_timesteps"] = int(rng.choice([1000000, 100000, 999999, 500000]))
                cfg["flow_shift"] = float(rng.choice([10.0, 100.0, 1000.0, float(rng.uniform(20, 1000))]))
            T = cfg["num_train_timesteps"]
            case.update(overrides={"native_flow_grid": True},
                        ref_sigmas=np.linspace(1.0 - 1.0 / T, 0.0, N + 1)[:-1])
        elif family == "unipc_pipeline_overrides":
            # The checkpoint's file (Karras on, shift 1) with the pipeline's overrides: Karras off, a shift.
            cfg.update(use_karras_sigmas=True, flow_shift=1.0, sigma_min=0.147, sigma_max=200.0)
            shift = float(rng.choice([3.0, 10.0])) if rng.random() < 0.5 else float(rand_shift(rng))
            case["overrides"] = {"use_karras_sigmas": False, "flow_shift": shift}
            case["ref_cfg"] = dict(cfg, use_karras_sigmas=False, flow_shift=shift)
        elif family == "unipc_refused":
            # What stepmix refuses by design (EXPECTED), and names Diffusers cannot build (both refuse).
            r = rng.random()
            N = max(N, 2)
            if r < 0.35:
                cfg.update(solver_order=2, lower_order_final=False)
            elif r < 0.6:
                cfg["solver_type"] = "bh1"
            elif r < 0.8:
                cfg.update(use_karras_sigmas=True, flow_shift=1.0, sigma_min=float(rng.choice([1e-3, 0.147, 1.0])),
                           sigma_max=float(rng.choice([1e8, 1e9, 3e7])))
                N = int(rng.integers(10, 61))
            else:
                cfg.pop("trained_betas", None)
                cfg["beta_schedule"] = str(rng.choice(["cosine", "sigmoid", "foo"]))
        case.update(cfg=cfg, N=N)
        return case
    cfg = fm_fields(rng, dict(FM))
    cfg["num_train_timesteps"] = rand_T(rng)
    cfg["shift"] = rand_shift(rng)
    stochastic = bool(rng.random() < 0.5)
    if family == "fm_default":
        if stochastic or rng.random() < 0.5:
            cfg["stochastic_sampling"] = stochastic
        case.update(cfg=cfg, N=rand_N(rng), stochastic=stochastic)
    elif family == "fm_t_list":
        tl = [1.0, 0.9375, 0.8333333333333334, 0.625] if rng.random() < 0.2 else sigma_list(rng, 12, rng.random() < 0.4)
        if rng.random() >= 0.6:
            cfg["shift"] = 1.0
        cfg.update(stochastic_sampling=True, fixed_step_requires_explicit_sigmas=True,
                   fixed_step_sampler_config={"sample_type": "sde", "t_list": tl})
        case.update(cfg=cfg, N=len(tl), ref_sigmas=tl, stochastic=True)
    else:  # fm_set_sigmas: the pipeline passes an explicit list
        tl = sigma_list(rng, 40, rng.random() < 0.5)
        cfg["stochastic_sampling"] = stochastic
        case.update(cfg=cfg, N=len(tl), overrides={"set_sigmas": tl}, ref_sigmas=tl, stochastic=stochastic)
    return case


# ---- fixed probes: one-field changes of the golden configs ---------------------------------------------

def probes():
    """(label, base, changes, N, what stepmix's refusal must say or None when it must run)."""
    g = os.path.join(ROOT, "tests", "data", "golden", "cosmos3-tiny", "scheduler")
    U = json.load(open(os.path.join(g, "unipc_flowshift10.json")))
    K = json.load(open(os.path.join(g, "unipc_checkpoint_default.json")))
    F = json.load(open(os.path.join(g, "flowmatch_euler_shift3.json")))
    tl = {"fixed_step_requires_explicit_sigmas": True, "fixed_step_sampler_config": {"sample_type": "sde", "t_list": [1.0, 0.5]}}
    return [
        ("u.golden", U, {}, 8, None), ("u.golden", U, {}, 35, None), ("u.golden", U, {}, 150, None),
        ("u.disable_corrector=[1,3,100]", U, {"disable_corrector": [1, 3, 100]}, 8, None),
        ("u.disable_corrector=null", U, {"disable_corrector": None}, 8, "disable_corrector: expected a list of step indices"),
        ("u.solver_type=midpoint", U, {"solver_type": "midpoint"}, 8, None),
        ("u.order1,lower_order_final=false", U, {"solver_order": 1, "lower_order_final": False}, 8, None),
        ("u.rescale_betas_zero_snr=true", U, {"rescale_betas_zero_snr": True}, 8, None),
        ("u.trained_betas=[0.1,0.2],custom", U, {"trained_betas": [0.1, 0.2], "beta_schedule": "custom"}, 8, None),
        ('u.trained_betas=["a"]', U, {"trained_betas": ["a"]}, 8, "trained_betas: expected null or a list of numbers"),
        ("u.native,T=1e6", U, {"num_train_timesteps": 1000000, "_native": True}, 4, None),
        ("u.final_sigmas_type=sigma_min", U, {"final_sigmas_type": "sigma_min"}, 8, 'final_sigmas_type: expected "zero"'),
        ("u.predict_x0=false", U, {"predict_x0": False}, 8, "predict_x0: expected true"),
        ("u.thresholding=true", U, {"thresholding": True}, 8, "thresholding: expected false"),
        ("u.use_exponential_sigmas=true", U, {"use_exponential_sigmas": True}, 8, "use_exponential_sigmas: expected false"),
        ("u.shift_terminal=0.1", U, {"shift_terminal": 0.1}, 8, "shift_terminal: expected null"),
        ("u.prediction_type=epsilon", U, {"prediction_type": "epsilon"}, 8, 'prediction_type: expected "flow_prediction"'),
        ("u.use_flow_sigmas=false", U, {"use_flow_sigmas": False}, 8, "use_flow_sigmas: expected true"),
        ("u.karras,flow_shift=10", U, {"use_karras_sigmas": True}, 8, "the reference ignores flow_shift on the Karras grid"),
        ("u.flow_shift=2000", U, {"flow_shift": 2000.0}, 8, "flow_shift: expected a positive number in [0.01, 1000]"),
        ("u.num_train_timesteps=1", U, {"num_train_timesteps": 1}, 8, "num_train_timesteps: expected a positive integer in [2, 1000000]"),
        ("u.unknown key", U, {"foo": 1}, 8, "unknown to stepmix; refusing to guess its effect"),
        ("u.karras,golden", K, {}, 8, None),
        ("u.karras,sigma_max=1e8", K, {"sigma_max": 1e8}, 8, "the schedule starts at sigma 0"),
        ("u.karras,sigma_max=2e7,35 steps", K, {"sigma_max": 2e7}, 35, "have the same float32 log-SNR"),
        # Distinct float32 sigmas whose float32 log-SNRs, as Diffusers computes them, coincide.
        ("u.karras,sigmas 3e-7 apart", K, {"sigma_min": 4.590496429735455e-4, "sigma_max": 4.5904979082932905e-4}, 3,
         "have the same float32 log-SNR"),
        ("f.golden", F, {}, 8, None), ("f.N=1500", F, {}, 1500, None),
        ("f.stochastic_sampling=true", F, {"stochastic_sampling": True}, 8, None),
        ("f.t_list", F, dict(tl, stochastic_sampling=True), 2, None),
        ("f.use_karras_sigmas=true", F, {"use_karras_sigmas": True}, 8, "Karras sigmas are implemented for UniPC only"),
        ("f.invert_sigmas=true", F, {"invert_sigmas": True}, 8, "invert_sigmas: expected false"),
        ("f.t_list,sample_type=ode", F, dict(tl, fixed_step_sampler_config={"sample_type": "ode", "t_list": [1.0, 0.5]}), 2,
         'sample_type: expected "sde"'),
        ("f.t_list,deterministic", F, dict(tl), 2, "stochastic_sampling: expected true"),
    ]


def probe_case(label, base, changes, N, expect):
    cfg = copy.deepcopy(base)
    native = changes.get("_native", False)  # the pipeline's native grid, passed as sigmas
    cfg.update({k: v for k, v in changes.items() if k != "_native"})
    case = {"family": "probes", "label": label, "cfg": cfg, "N": N, "overrides": None, "ref_sigmas": None,
            "stochastic": bool(cfg.get("stochastic_sampling")) and cfg["_class_name"] == FM["_class_name"],
            "expect": expect}
    fixed = cfg.get("fixed_step_sampler_config")
    if fixed and cfg.get("fixed_step_requires_explicit_sigmas"):
        case["ref_sigmas"] = fixed["t_list"]
    if native:
        T = cfg["num_train_timesteps"]
        case.update(overrides={"native_flow_grid": True}, ref_sigmas=np.linspace(1.0 - 1.0 / T, 0.0, N + 1)[:-1])
    return case


# ---- the two sides -----------------------------------------------------------------------------------

def toy_model(rng, shape):
    a, b = float(rng.uniform(0.3, 1.3)), float(rng.uniform(0.0, 0.5))
    c = float(rng.choice([0.0, 0.1, 0.5]))
    eps = rng.standard_normal((64,) + shape).astype(np.float32)
    return lambda x, t, i: (a * x.double() - b * math.cos(0.01 * t) + c * torch.from_numpy(eps[i % 64]).double()).float()


def reference(case, x0, model, noise, vs=None, float64=False):
    """Diffusers' run from index 0: float32 sigmas, latents, model outputs, or the exception's text.
    With vs given, replays them; float64 runs the same file on float64 tensors (the sigmas are the
    float32 values, promoted) as a yardstick for UniPC's scalar arithmetic."""
    cfg = case.get("ref_cfg", case["cfg"])
    try:
        s = ds.from_config(cfg)
        if case["ref_sigmas"] is not None:
            fm = cfg["_class_name"] == FM["_class_name"]
            s.set_timesteps(None if fm else case["N"], sigmas=list(case["ref_sigmas"]) if fm else case["ref_sigmas"])
        else:
            s.set_timesteps(case["N"])
        s.set_begin_index(0)
        if float64:
            s.sigmas = s.sigmas.double()
        dtype = torch.float64 if float64 else torch.float32
        unipc = cfg["_class_name"] == UNIPC["_class_name"]
        x = torch.from_numpy(x0.copy()).to(dtype)
        latents, outputs = [], []
        ds.NOISE.clear()
        for i, t in enumerate(s.timesteps):
            v = model(x, float(t), i) if vs is None else torch.from_numpy(vs[i])
            outputs.append(v.numpy().copy())
            if unipc:
                x = s.step(v.to(dtype)[None], t, x[None], return_dict=False)[0][0]
            else:
                if noise is not None:
                    ds.NOISE.append(torch.from_numpy(noise[i].copy()))
                x = s.step(v, t, x, return_dict=False)[0]
            latents.append(x.numpy().copy())
        latents = np.stack(latents)
        return {"sigmas": s.sigmas.float().numpy().copy(), "timesteps": s.timesteps.numpy().astype(np.float64),
                "latents": latents, "vs": np.stack(outputs), "nonfinite": int((~np.isfinite(latents)).sum())}
    except Exception as e:  # the reference's refusal or failure is its answer
        return f"{type(e).__name__}: {e}"


def write_replay(folder, i, case, x0, vs, noise):
    paths = [os.path.join(folder, f"{i}.{k}") for k in ("json", "ov.json", "in", "out")]
    with open(paths[0], "w") as f:
        json.dump(case["cfg"], f)
    if case["overrides"]:
        with open(paths[1], "w") as f:
            json.dump(case["overrides"], f)
    with open(paths[2], "wb") as f:
        f.write(struct.pack("<qii", x0.size, len(vs), noise is not None))
        f.write(x0.astype(np.float32).tobytes())
        f.write(np.ascontiguousarray(vs, np.float32).tobytes())
        if noise is not None:
            f.write(np.ascontiguousarray(noise[:len(vs)], np.float32).tobytes())
    return "\t".join([paths[0], str(case["N"]), paths[1] if case["overrides"] else "-", paths[2], paths[3]])


def read_replay(path, shape):
    b = open(path, "rb").read()
    n = struct.unpack("<i", b[:4])[0]
    sigmas = np.frombuffer(b[4:8 + 4 * n], np.float32)
    timesteps = np.frombuffer(b[8 + 4 * n:8 + 12 * n], np.float64)
    return {"sigmas": sigmas, "timesteps": timesteps, "latents": np.frombuffer(b[8 + 12 * n:], np.float32).reshape((n,) + shape)}


# ---- comparison ----------------------------------------------------------------------------------------

def same_bits(a, b):
    a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def latent_error(a, g):
    """max over steps of max|a − g| / max|g|; 0 where equal bit for bit or non-finite alike."""
    worst = 0.0
    for k in range(g.shape[0]):
        if same_bits(a[k], g[k]):
            continue
        x, y = a[k].astype(np.float64), g[k].astype(np.float64)
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            alike = np.array_equal(np.isnan(x), np.isnan(y)) and np.array_equal(np.nan_to_num(x), np.nan_to_num(y))
            worst = worst if alike else math.inf
            continue
        scale = np.abs(y).max()
        worst = max(worst, float(np.abs(x - y).max() / (scale if scale > 0 else 1.0)))
    return worst


def judge(case, ref, sm, x0, model, noise):
    """(outcome, detail) for a case both sides ran."""
    schedule_exact = (len(ref["timesteps"]) == len(sm["timesteps"]) and same_bits(ref["sigmas"], sm["sigmas"])
                      and np.array_equal(ref["timesteps"], sm["timesteps"]))
    if not schedule_exact:
        return "mismatch", {"why": "schedule", "reference_sigmas": ref["sigmas"][:4].tolist(),
                            "stepmix_sigmas": sm["sigmas"][:4].tolist(), "reference_timesteps": ref["timesteps"][:4].tolist(),
                            "stepmix_timesteps": sm["timesteps"][:4].tolist()}
    error = latent_error(sm["latents"], ref["latents"])
    detail = {"latent_error": error}
    if case.get("ref_cfg", case["cfg"])["_class_name"] == FM["_class_name"]:
        return ("match", detail) if error == 0.0 else ("mismatch", dict(detail, why="FlowMatch latents not bit for bit"))
    if error <= UNIPC_BOUND:
        return "match", detail
    if math.isinf(error):  # non-finite on one side only: a different result, however accurate the other
        return "mismatch", dict(detail, why="non-finite latents on one side", reference_nonfinite=ref["nonfinite"],
                                stepmix_nonfinite=int((~np.isfinite(sm["latents"])).sum()))
    exact = reference(case, x0, model, noise, vs=ref["vs"], float64=True)
    if isinstance(exact, str):
        return "mismatch", dict(detail, why="past the bound; the float64 run failed: " + exact)
    d_ref = _distance(ref["latents"], exact["latents"])
    d_sm = _distance(sm["latents"], exact["latents"])
    detail.update(reference_vs_float64=d_ref, stepmix_vs_float64=d_sm)
    if d_sm <= max(UNIPC_BOUND, d_ref):
        return "match", detail
    return "mismatch", dict(detail, why="UniPC latents past the bound and farther than Diffusers from float64")


def _distance(a, exact):
    return max(float(np.abs(a[k].astype(np.float64) - exact[k]).max() / max(np.abs(exact[k]).max(), 1e-300))
               for k in range(exact.shape[0]))


def classify(case, ref, message):
    """The outcome of a case stepmix refused, with the expected refusal's premise checked."""
    if isinstance(ref, str):
        return "both-refused", None
    if case.get("expect"):
        return ("refused-as-designed", case["expect"]) if case["expect"] in message else ("refused-unexpectedly", None)
    for text, premise, why in EXPECTED:
        if text in message and premise(ref, case):
            return "refused-as-designed", why
    return "refused-unexpectedly", None


def load(args):
    ds.load(args.diffusers)


def run(tally, args, work):
    torch.set_num_threads(1)
    cases = [probe_case(*p) for p in probes()]
    cases += [random_case(FAMILIES[i % len(FAMILIES)], np.random.default_rng([args.seed, 1, i])) | {"index": i}
              for i in range(args.cases)]
    folder = os.path.join(work, "scheduler")
    os.makedirs(folder, exist_ok=True)
    for start in range(0, len(cases), 200):  # a batch: reference runs, one replay call, comparisons
        batch, lines = [], []
        for i, case in enumerate(cases[start:start + 200]):
            rng = np.random.default_rng([args.seed, 2, start + i])
            shape = [(4, 2, 6, 6), (16, 1, 4, 8), (1, 1, 3, 5)][int(rng.integers(0, 3))]
            x0 = (rng.standard_normal(shape) * float(rng.choice([1.0, 1.0, 0.1, 30.0]))).astype(np.float32)
            model = toy_model(rng, shape)
            noise = rng.standard_normal((max(case["N"], 1) + 1,) + shape).astype(np.float32) if case["stochastic"] else None
            with np.errstate(all="ignore"):
                ref = reference(case, x0, model, noise)
            vs = np.zeros((max(case["N"], 1),) + shape, np.float32) if isinstance(ref, str) else ref["vs"]
            lines.append(write_replay(folder, i, case, x0, vs, noise))
            batch.append((case, x0, model, noise, ref))
        manifest = os.path.join(folder, "manifest.tsv")
        with open(manifest, "w") as f:
            f.write("\n".join(lines) + "\n")
        answers = subprocess.run([args.replay, manifest], capture_output=True, text=True, check=True).stdout.splitlines()
        if len(answers) != len(batch):
            raise OSError(f"{args.replay}: {len(answers)} answers for {len(batch)} cases")
        for i, ((case, x0, model, noise, ref), answer) in enumerate(zip(batch, answers)):
            record = {k: case.get(k) for k in ("family", "label", "index", "cfg", "N", "overrides")}
            if case.get("ref_cfg"):
                record["reference_cfg"] = case["ref_cfg"]
            if answer == "OK":
                sm = read_replay(os.path.join(folder, f"{i}.out"), x0.shape)
                if isinstance(ref, str):
                    outcome, detail = "only-reference-failed", {"reference": ref}
                else:
                    with np.errstate(all="ignore"):
                        outcome, detail = judge(case, ref, sm, x0, model, noise)
                    unipc = case.get("ref_cfg", case["cfg"])["_class_name"] == UNIPC["_class_name"]
                    if math.isfinite(detail.get("latent_error", 0.0)):  # a non-finite one is among the failures
                        tally.worst("UniPC latents" if unipc else "FlowMatch latents", detail.get("latent_error", 0.0), record)
                    if "stepmix_vs_float64" in detail:
                        tally.note("UniPC past the bound, no farther than Diffusers from its float64 run", detail, record,
                                   stepmix_from_float64=detail["stepmix_vs_float64"],
                                   Diffusers_from_float64=detail["reference_vs_float64"])
                if case.get("expect"):  # a probe that must be refused ran
                    outcome, detail = "mismatch" if outcome == "match" else outcome, dict(detail, why="expected a refusal: " + case["expect"])
            else:
                stage, _, message = answer[len("REFUSED "):].partition("\t")
                message = message.replace(folder + os.sep, "")  # the case's file by its own name
                outcome, why = classify(case, ref, message)
                detail = {"stepmix": message, "reference": ref if isinstance(ref, str) else "ran"}
                if why:
                    detail["by_design"] = why
            tally.add(case["family"], outcome, record, detail)
