"""Reading a `torch.save` checkpoint without running code from it, and without its project.

A checkpoint of fairseq or OpenNMT-py is a pickle of tensors, plain data, an
`argparse.Namespace` of the training options and, in its training state, objects of the
project's own classes. It is read with torch's `weights_only` unpickler, which runs no code
from the file: the argparse namespace is allowed, and every other class the file names
(meters, numpy scalars, omegaconf nodes, enums) becomes an inert `UnreadObject` holding its
arguments and state, so nothing of the project needs to be importable.
"""

import argparse
import os
import pickletools
import re
import zipfile

from keras_transformer.pretrained.torch_load_error import torch_load_error

_UNSUPPORTED_GLOBAL = re.compile(r"GLOBAL (\S+) was not an allowed global")
_MAX_STUBBED_GLOBALS = 200
# What `peek_strings` reads of a pickle at most.
_PEEK_OPCODES = 100_000


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


def import_torch(
    hint="reading a fairseq checkpoint needs PyTorch: pip install 'keras-transformer-mt[fairseq]'",
):
    """torch, or an ImportError whose message is `hint`: one line saying how to install it."""
    try:
        import torch
    except ImportError:
        raise ImportError(hint) from None
    return torch


def _stubbed_globals(torch, path):
    """The classes and functions the file names beyond torch's allowlist, as `UnreadObject`."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except (ValueError, RuntimeError):
        return []  # a legacy (non-zip) file: found one at a time by `load_checkpoint`
    return [(UnreadObject, name) for name in names if name != "argparse.Namespace"]


def load_checkpoint(path, expected, torch=None):
    """The object a `torch.save` file holds, loaded without running its code.

    Args:
        path: str or path-like.
        expected: str, what the file should hold, for messages.
        torch: the torch module (`import_torch()` by default).

    Returns:
        The unpickled object (a dict for a fairseq checkpoint), tensors on the CPU.

    Raises:
        ImportError: torch is not installed.
        ValueError: the file is not a torch checkpoint; the message names it.
    """
    torch = torch or import_torch()
    path = os.fspath(path)
    allowed = [(argparse.Namespace, "argparse.Namespace"), *_stubbed_globals(torch, path)]
    for _ in range(_MAX_STUBBED_GLOBALS):
        try:
            with torch.serialization.safe_globals(allowed):
                return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:
            found = _UNSUPPORTED_GLOBAL.search(str(error))
            if found is None or (UnreadObject, found.group(1)) in allowed:
                raise torch_load_error(path, error, expected) from None
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


def peek_strings(path):
    """The strings a zip-format `torch.save` file's pickle holds, read without unpickling.

    Used to tell checkpoints of different projects apart (their keys) before torch
    loads; an older (non-zip) file or an unreadable one gives an empty set.
    """
    strings = set()
    try:
        with zipfile.ZipFile(path) as archive:
            names = [name for name in archive.namelist() if name.endswith("data.pkl")]
            if not names:
                return strings
            data = archive.read(names[0])
        for count, (_, argument, _) in enumerate(pickletools.genops(data)):
            if isinstance(argument, str):
                strings.add(argument)
            if count > _PEEK_OPCODES:
                break
    except (OSError, ValueError, zipfile.BadZipFile):
        pass
    return strings
