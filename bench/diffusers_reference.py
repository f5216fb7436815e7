"""Diffusers' Cosmos3 transformer and Wan2.2 VAE, loaded from a Diffusers checkout without the package,
for bench/diffusers_differential.py.

The `diffusers` package needs libraries Debian does not ship (huggingface_hub, safetensors, ...), so
the model files are executed from the checkout as written, with small stand-ins for what they import:
the config decorator (it stores the constructor's arguments, defaults included), ModelMixin as
nn.Module, the output classes, logging. The pieces of other Diffusers files that the models call are
taken from those files verbatim (by their source text, through `ast`): RMSNorm, Timesteps,
TimestepEmbedding, get_timestep_embedding, get_activation, the attention mixins,
DiagonalGaussianDistribution, and the pipeline's text and vision segment packing.

Two functions stand in for code this torch (1.13) lacks: attention dispatch on the native backend is
torch >= 2.5's documented scaled_dot_product_attention math (enable_gqa repeats the key and value
heads), and F.scaled_dot_product_attention, which the VAE's middle attention calls, is the same
math. The scheduler files are loaded by training/diffusers_schedulers.py.

    import diffusers_reference as dr
    dr.set_root("/path/to/diffusers")
    Transformer = dr.transformer_module().Cosmos3OmniTransformer
    pipe = dr.pipeline_helpers()["_Pipe"]        # _prepare_text_segment, _prepare_vision_segment
    vae = dr.vae_module().AutoencoderKLWan(**config)
"""
import ast
import dataclasses
import functools
import importlib.util
import inspect
import logging
import math
import numbers
import os
import subprocess
import sys
import types
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = None  # the checkout's root folder


def set_root(root):
    global ROOT
    ROOT = root


def source(relative):
    return os.path.join(ROOT, "src", "diffusers", relative)


def required_files():
    """The files this loader and the scheduler loader execute, relative to the checkout."""
    return ["src/diffusers/" + p for p in (
        "models/transformers/transformer_cosmos3.py", "models/autoencoders/autoencoder_kl_wan.py",
        "models/autoencoders/vae.py", "models/activations.py", "models/embeddings.py", "models/normalization.py",
        "models/attention.py", "pipelines/cosmos/pipeline_cosmos3_omni.py",
        "schedulers/scheduling_unipc_multistep.py", "schedulers/scheduling_flow_match_euler_discrete.py")]


def commit(root):
    """The checkout's commit, or None where it is not a git checkout (or git is missing)."""
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None


def extract(relative, names):
    """The source text of the named top-level definitions of a Diffusers file, as written there."""
    path = source(relative)
    text = open(path).read()
    found = {}
    for node in ast.parse(text).body:
        name = None
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        if name in names:
            found[name] = ast.get_source_segment(text, node)
    missing = set(names) - set(found)
    if missing:
        raise RuntimeError(f"{path}: no {', '.join(sorted(missing))}")
    return "\n\n".join(found[n] for n in names)


def sdpa_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """torch >= 2.5 F.scaled_dot_product_attention as its documentation defines it, in the inputs' dtype."""
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=query.dtype)
    if is_causal:
        assert attn_mask is None
        bias.masked_fill_(torch.ones(L, S, dtype=torch.bool).tril(diagonal=0).logical_not(), float("-inf"))
    if attn_mask is not None:
        bias = bias.masked_fill(attn_mask.logical_not(), float("-inf")) if attn_mask.dtype == torch.bool \
            else attn_mask + bias
    if enable_gqa:
        key = key.repeat_interleave(query.size(-3) // key.size(-3), -3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), -3)
    weight = torch.softmax(query @ key.transpose(-2, -1) * scale_factor + bias, dim=-1)
    assert dropout_p == 0.0  # eval mode
    return weight @ value


def dispatch_attention_fn(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                          enable_gqa=False, attention_kwargs=None, *, backend=None, parallel_config=None):
    """attention_dispatch's native backend: [B, S, H, D] in and out, the shape checks it makes."""
    assert backend is None and parallel_config is None
    if query.shape[-1] != key.shape[-1]:
        raise ValueError("Query and key must have the same head dimension.")
    if key.shape[-3] != value.shape[-3]:
        raise ValueError("Key and value must have the same sequence length.")
    if attn_mask is not None and attn_mask.ndim == 2 and attn_mask.shape[0] == query.shape[0] \
            and attn_mask.shape[1] == key.shape[1]:
        attn_mask = attn_mask.unsqueeze(1).unsqueeze(1)
    # torch's SDPA requires whole groups with enable_gqa and equal head counts without
    if (query.shape[2] % key.shape[2]) if enable_gqa else (query.shape[2] != key.shape[2]):
        raise RuntimeError("scaled_dot_product_attention: number of query heads must be a multiple of kv heads")
    q, k, v = (x.permute(0, 2, 1, 3) for x in (query, key, value))
    out = sdpa_math(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                    enable_gqa=enable_gqa)
    return out.permute(0, 2, 1, 3)


class FrozenDict(OrderedDict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name)


class ConfigMixin:
    config_name = "config.json"
    ignore_for_config = []

    def register_to_config(self, **kwargs):
        merged = dict(getattr(self, "_internal_dict", {}))
        merged.update(kwargs)
        self._internal_dict = FrozenDict(merged)

    @property
    def config(self):
        return self._internal_dict


def register_to_config(init):
    """Registers the constructor's arguments with their defaults; values the constructor registers
    itself (the transformer's rope_axes_dim) win, as in Diffusers."""
    @functools.wraps(init)
    def wrapped(self, *args, **kwargs):
        bound = inspect.signature(init).bind(self, *args, **kwargs)
        bound.apply_defaults()
        ignore = set(getattr(self, "ignore_for_config", []))
        arguments = {k: v for k, v in bound.arguments.items() if k != "self" and k not in ignore}
        init(self, *args, **kwargs)
        merged = dict(arguments)
        merged.update(getattr(self, "_internal_dict", {}))
        self._internal_dict = FrozenDict(merged)
    return wrapped


def _module(name, **attributes):
    module = types.ModuleType(name)
    module.__path__ = []
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def _execute(name, relative):
    spec = importlib.util.spec_from_file_location(name, source(relative))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_modules = {}


def _install():
    """Registers the package modules both models import (again before each model file runs, since
    training/diffusers_schedulers.py registers stand-ins of its own under the same names)."""
    if not _modules:
        activations = {"nn": nn, "torch": torch}
        exec(extract("models/activations.py", ["ACT2CLS", "get_activation"]), activations)
        embeddings = {"math": math, "torch": torch, "nn": nn, "F": F, "get_activation": activations["get_activation"]}
        exec(extract("models/embeddings.py", ["get_timestep_embedding", "TimestepEmbedding", "Timesteps"]), embeddings)
        normalization = {"numbers": numbers, "torch": torch, "nn": nn, "F": F, "is_torch_npu_available": lambda: False}
        exec(extract("models/normalization.py", ["RMSNorm"]), normalization)

        class _TypeName:  # annotations only
            pass
        attention = {"torch": torch, "nn": nn, "F": F, "logger": logging.getLogger("diffusers"),
                     "AttentionProcessor": _TypeName, "Attention": _TypeName, "deprecate": lambda *a, **k: None}
        exec("from typing import Any, Callable\n" +
             extract("models/attention.py", ["AttentionMixin", "AttentionModuleMixin"]), attention)

        @dataclasses.dataclass
        class BaseOutput:
            pass
        _modules.update({
            "diffusers": {},
            "diffusers.configuration_utils": dict(ConfigMixin=ConfigMixin, register_to_config=register_to_config),
            "diffusers.loaders": dict(PeftAdapterMixin=type("PeftAdapterMixin", (), {}),
                                      FromOriginalModelMixin=type("FromOriginalModelMixin", (), {})),
            "diffusers.utils": dict(BaseOutput=BaseOutput, logging=types.SimpleNamespace(get_logger=logging.getLogger)),
            "diffusers.utils.accelerate_utils": dict(apply_forward_hook=lambda f: f),
            "diffusers.models": {},
            "diffusers.models.activations": dict(get_activation=activations["get_activation"]),
            "diffusers.models.attention": dict(AttentionMixin=attention["AttentionMixin"],
                                               AttentionModuleMixin=attention["AttentionModuleMixin"]),
            "diffusers.models.attention_dispatch": dict(dispatch_attention_fn=dispatch_attention_fn),
            "diffusers.models.embeddings": dict(TimestepEmbedding=embeddings["TimestepEmbedding"],
                                                Timesteps=embeddings["Timesteps"],
                                                get_timestep_embedding=embeddings["get_timestep_embedding"]),
            "diffusers.models.modeling_utils": dict(ModelMixin=nn.Module),
            "diffusers.models.normalization": dict(RMSNorm=normalization["RMSNorm"]),
            "diffusers.models.transformers": {},
            "diffusers.models.autoencoders": {},
        })
    for name, attributes in _modules.items():
        _module(name, **attributes)
    return _modules


def transformer_module():
    name = "diffusers.models.transformers.transformer_cosmos3"
    if name not in sys.modules:
        _install()
        _execute(name, "models/transformers/transformer_cosmos3.py")
    return sys.modules[name]


def vae_module():
    name = "diffusers.models.autoencoders.autoencoder_kl_wan"
    if name in sys.modules:
        return sys.modules[name]
    base = _install()["diffusers.utils"]["BaseOutput"]
    if not hasattr(F, "scaled_dot_product_attention"):
        F.scaled_dot_product_attention = sdpa_math
    vae = {"torch": torch, "np": __import__("numpy"), "randn_tensor": None}
    exec(extract("models/autoencoders/vae.py", ["DiagonalGaussianDistribution"]), vae)

    @dataclasses.dataclass
    class DecoderOutput(base):
        sample: torch.Tensor
        commit_loss: object = None

    @dataclasses.dataclass
    class AutoencoderKLOutput(base):
        latent_dist: object
    _module("diffusers.models.modeling_outputs", AutoencoderKLOutput=AutoencoderKLOutput)
    _module("diffusers.models.autoencoders.vae", AutoencoderMixin=type("AutoencoderMixin", (), {}),
            DecoderOutput=DecoderOutput, DiagonalGaussianDistribution=vae["DiagonalGaussianDistribution"])
    return _execute(name, "models/autoencoders/autoencoder_kl_wan.py")


def pipeline_helpers():
    """The Cosmos3 pipeline's sequence packing, verbatim: get_3d_mrope_ids_* and the methods
    _prepare_text_segment, _prepare_vision_segment of a class _Pipe (called with a stand-in self)."""
    relative = "pipelines/cosmos/pipeline_cosmos3_omni.py"
    namespace = {"torch": torch, "math": math}
    exec("from typing import Any\n" +
         extract(relative, ["get_3d_mrope_ids_text_tokens", "get_3d_mrope_ids_vae_tokens"]), namespace)
    text = open(source(relative)).read()
    methods = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and node.name == "Cosmos3OmniPipeline":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in ("_prepare_text_segment",
                                                                       "_prepare_vision_segment"):
                    decorators = "".join("@" + ast.get_source_segment(text, d) + "\n" for d in item.decorator_list)
                    methods.append(decorators + ast.get_source_segment(text, item))
    if len(methods) != 2:
        raise RuntimeError(f"{source(relative)}: the segment packing methods are not where expected")
    exec("class _Pipe:\n" + "\n".join("    " + line for m in methods for line in ("\n" + m).splitlines()),
         namespace)
    return namespace
