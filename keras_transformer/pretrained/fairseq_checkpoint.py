"""Reading a fairseq checkpoint (`checkpoint_best.pt`, `model.pt`) without fairseq or its code.

A fairseq checkpoint is a `torch.save` pickle: `{"args": argparse.Namespace, "model": state
dict, ...}` (fairseq < 0.10) or `{"cfg": {"model": ..., "task": ...}, "model": ...}`. It is
read with torch's `weights_only` unpickler, which runs no code from the file: the argparse
namespace is allowed, and every other class the file names (fairseq's meters, numpy scalars,
omegaconf nodes, enums) becomes an inert `UnreadObject` holding its arguments and state, so
nothing of fairseq needs to be importable.
"""

import argparse
import os
import re

from keras_transformer.pretrained.torch_load_error import torch_load_error

# What the training-state part of a checkpoint may name; only their data is kept.
_UNSUPPORTED_GLOBAL = re.compile(r"GLOBAL (\S+) was not an allowed global")
_MAX_STUBBED_GLOBALS = 200
EXPECTED_CONTENT = "a fairseq checkpoint of tensors and settings"


class UnreadObject:
    """An object of a class the checkpoint names but that is not loaded: its data only."""

    def __new__(cls, *args, **kwargs):
        instance = super().__new__(cls)
        instance.args, instance.state = args, None
        return instance

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self.state = state


def import_torch():
    """torch, or an ImportError whose message is one line saying how to install it."""
    try:
        import torch
    except ImportError:
        raise ImportError(
            "reading a fairseq checkpoint needs PyTorch: "
            "pip install 'keras-transformer-mt[fairseq]'"
        ) from None
    return torch


def _stubbed_globals(torch, path):
    """The classes and functions the file names beyond torch's allowlist, as `UnreadObject`."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except (ValueError, RuntimeError):
        return []  # a legacy (non-zip) file: found one at a time by `load_checkpoint`
    return [(UnreadObject, name) for name in names if name != "argparse.Namespace"]


def load_checkpoint(path):
    """The object a fairseq `torch.save` file holds, loaded without running its code.

    Args:
        path: str or path-like.

    Returns:
        The unpickled object (a dict for a fairseq checkpoint), tensors on the CPU.

    Raises:
        ImportError: torch is not installed.
        ValueError: the file is not a torch checkpoint; the message names it.
    """
    torch = import_torch()
    path = os.fspath(path)
    allowed = [(argparse.Namespace, "argparse.Namespace"), *_stubbed_globals(torch, path)]
    for _ in range(_MAX_STUBBED_GLOBALS):
        try:
            with torch.serialization.safe_globals(allowed):
                return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:
            found = _UNSUPPORTED_GLOBAL.search(str(error))
            if found is None or (UnreadObject, found.group(1)) in allowed:
                raise torch_load_error(path, error, EXPECTED_CONTENT) from None
            allowed.append((UnreadObject, found.group(1)))
    raise ValueError(f"{path}: names more than {_MAX_STUBBED_GLOBALS} unknown classes")


def plain(value):
    """`value` with namespaces, omegaconf nodes and enum members turned into plain data."""
    if isinstance(value, argparse.Namespace):
        return {key: plain(item) for key, item in vars(value).items()}
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(item) for item in value)
    if isinstance(value, UnreadObject):
        state = value.state
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
            state = state[0]
        if isinstance(state, dict) and "_content" in state:  # an omegaconf container
            return plain(state["_content"])
        if isinstance(state, dict) and "_val" in state:  # an omegaconf value node
            return plain(state["_val"])
        if state is None and len(value.args) == 1 and isinstance(value.args[0], str):
            return value.args[0]  # an enum member: fairseq's choice enums hold strings
    return value


def _flatten_model_settings(model):
    """The settings under fairseq's flat names (`encoder_embed_dim`, ...).

    Dataclass-style configs nest them (`encoder: {embed_dim: ...}`).
    """
    flat = {key: value for key, value in model.items() if key not in ("encoder", "decoder")}
    for stack in ("encoder", "decoder"):
        nested = model.get(stack)
        if isinstance(nested, dict):
            for key, value in nested.items():
                flat.setdefault(f"{stack}_{key}", value)
    if "_name" in flat:
        flat.setdefault("arch", flat["_name"])
    return flat


def checkpoint_settings(checkpoint, path):
    """The model's and the task's settings of a loaded fairseq checkpoint.

    Args:
        checkpoint: what `load_checkpoint` returned.
        path: the file's name, for messages.

    Returns:
        `(model, task)`: two dicts under fairseq's argument names; `model`
        has `arch`, `task` has `source_lang`, `target_lang`, `tokenizer` and
        `bpe` where the checkpoint records them.

    Raises:
        ValueError: no model settings or no state dict in it.
    """
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("model"), dict):
        raise ValueError(f"{path}: not a fairseq checkpoint (no 'model' state dict in it)")
    cfg = plain(checkpoint.get("cfg"))
    args = plain(checkpoint.get("args"))
    if isinstance(cfg, dict) and isinstance(cfg.get("model"), dict):
        model = _flatten_model_settings(cfg["model"])
        task = dict(cfg.get("task") or {})
        for section in ("tokenizer", "bpe"):
            settings = cfg.get(section)
            if isinstance(settings, dict):
                task.setdefault(section, settings.get("_name"))
                task.update({k: v for k, v in settings.items() if k != "_name"})
    elif isinstance(args, dict):
        model, task = _flatten_model_settings(args), args
    else:
        raise ValueError(f"{path}: not a fairseq checkpoint (neither 'args' nor 'cfg' in it)")
    if not model.get("arch"):
        raise ValueError(f"{path}: the checkpoint's settings name no architecture ('arch')")
    return model, task
