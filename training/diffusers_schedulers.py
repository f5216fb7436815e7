"""Diffusers' UniPC and FlowMatch Euler scheduler files, loaded from a Diffusers checkout without the package.

The `diffusers` package needs libraries Debian does not ship (huggingface_hub, packaging, ...), so only the
two scheduler files are executed, from the checkout given, with small stand-ins for what they import
(the config decorator, the output classes, deprecate, logging, randn_tensor). The scheduler logic runs
as written. randn_tensor hands out the tensors queued in NOISE (for FlowMatch Euler's stochastic step).

    import diffusers_schedulers as ds
    ds.load("/path/to/diffusers")          # the checkout's root
    s = ds.from_config(scheduler_config_dict)
"""
import enum
import functools
import importlib.util
import inspect
import logging
import os
import sys
import types
from dataclasses import dataclass

import torch

NOISE = []
_CLASSES = {}


class _Config(types.SimpleNamespace):
    def __getitem__(self, key):
        return getattr(self, key)

    def keys(self):
        return self.__dict__.keys()


class _ConfigMixin:
    config_name = "scheduler_config.json"

    def register_to_config(self, **kwargs):
        if not hasattr(self, "_internal_dict"):
            self._internal_dict = _Config()
        for key, value in kwargs.items():
            setattr(self._internal_dict, key, value)

    @property
    def config(self):
        return self._internal_dict


def _register_to_config(init):
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapped(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        _ConfigMixin.register_to_config(self, **{k: v for k, v in bound.arguments.items() if k != "self"})
        init(self, *args, **kwargs)

    return wrapped


class _BaseOutput:
    def __getitem__(self, i):
        return list(self.__dict__.values())[i]


@dataclass
class _SchedulerOutput(_BaseOutput):
    prev_sample: torch.Tensor


class _SchedulerMixin:
    pass


class _Schedulers(enum.Enum):
    DDIMScheduler = 1


def _randn_tensor(shape, generator=None, device=None, dtype=None, layout=None):
    t = NOISE.pop(0)
    assert tuple(t.shape) == tuple(shape), (t.shape, shape)
    return t.to(dtype) if dtype is not None else t


def load(diffusers_root):
    """Executes the two scheduler files of the checkout; idempotent."""
    if _CLASSES:
        return
    folder = os.path.join(diffusers_root, "src", "diffusers", "schedulers")
    modules = {
        "diffusers": {},
        "diffusers.configuration_utils": {"ConfigMixin": _ConfigMixin, "register_to_config": _register_to_config},
        "diffusers.utils": {"BaseOutput": _BaseOutput, "deprecate": lambda *a, **k: None, "is_scipy_available": lambda: False,
                            "logging": types.SimpleNamespace(get_logger=logging.getLogger)},
        "diffusers.utils.torch_utils": {"randn_tensor": _randn_tensor},
        "diffusers.schedulers": {},
        "diffusers.schedulers.scheduling_utils": {"KarrasDiffusionSchedulers": _Schedulers,
                                                  "SchedulerMixin": _SchedulerMixin, "SchedulerOutput": _SchedulerOutput},
    }
    for name, attributes in modules.items():
        module = types.ModuleType(name)
        module.__path__ = [folder] if name == "diffusers.schedulers" else []
        module.__dict__.update(attributes)
        sys.modules[name] = module
    for file, cls in (("scheduling_unipc_multistep", "UniPCMultistepScheduler"),
                      ("scheduling_flow_match_euler_discrete", "FlowMatchEulerDiscreteScheduler")):
        full = "diffusers.schedulers." + file
        spec = importlib.util.spec_from_file_location(full, os.path.join(folder, file + ".py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
        _CLASSES[cls] = getattr(module, cls)


def from_config(config):
    """As SchedulerMixin.from_config: the constructor's keys are passed, the others ignored."""
    cls = _CLASSES[config["_class_name"]]
    parameters = inspect.signature(cls.__init__).parameters
    return cls(**{k: v for k, v in config.items() if k in parameters and k != "self"})
