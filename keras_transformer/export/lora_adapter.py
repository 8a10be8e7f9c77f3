"""LoRA adapter files: the factors of a model's adapted projections, apart from its weights.

An adapter file (`.lora`, HDF5) holds each adapted projection's A and B, the LoRA settings
(rank, alpha, targets) and the fingerprint of the base model's weights (SHA-256 over their
values, in the model's order), so that it is applied only to the model it was trained on.
Reading its settings (`read_adapter_settings`) loads no backend.
"""

import hashlib
import io
import json
import os

import h5py
import numpy as np

from keras_transformer.text.text_files import write_bytes_atomic

FORMAT = "keras_transformer.lora_adapter"
# 2: A B the whole attention projection's change (A (d_model, rank), B (rank, heads, head_dim)).
# Version 1 files hold per-head factors of W^Q, W^K, W^V, which no rank-r pair reproduces.
FORMAT_VERSION = 2
SETTINGS = ("rank", "alpha", "targets")
EXPECTED = "a LoRA adapter file (adapter.lora of a `train --lora-rank` run)"


def weights_fingerprint(model):
    """SHA-256 of a model's base weights: every weight but the LoRA factors, in order.

    The same for a model with LoRA enabled (its frozen kernels) and the model
    file it started from.

    Returns:
        str, 64 hex digits.

    Example:

    >>> model, _ = load_translation_model("opus-mt-en-de.keras")
    >>> weights_fingerprint(model)[:12]
    '776b1c1f7783'
    """
    from keras import ops

    from keras_transformer.models.lora import lora_factors

    factors = {id(v) for pair in lora_factors(model).values() for v in pair}
    digest = hashlib.sha256()
    for variable in model.weights:
        if id(variable) in factors:
            continue
        value = np.ascontiguousarray(ops.convert_to_numpy(variable))
        digest.update(f"{value.dtype.str}{value.shape}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def save_adapter(model, path, base_fingerprint=None):
    """Writes the LoRA factors of `model` (LoRA enabled) to `path`, atomically.

    Args:
        model: a `Seq2SeqTransformer` after `enable_lora`.
        path: str, the file (`adapter.lora`).
        base_fingerprint: str or None, `weights_fingerprint` of the base
            model; None computes it from `model`'s frozen weights.

    Returns:
        str, `path`.

    Example:

    >>> model.enable_lora(8)
    >>> save_adapter(model, "runs/adapted/adapter.lora")
    """
    from keras import ops

    from keras_transformer.models.lora import lora_factors

    if not model.lora_settings:
        raise ValueError("`model` has no LoRA adapters: call `enable_lora` first.")
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as file:
        file.attrs["format"] = FORMAT
        file.attrs["format_version"] = FORMAT_VERSION
        file.attrs["settings"] = json.dumps(model.lora_settings)
        file.attrs["base_fingerprint"] = base_fingerprint or weights_fingerprint(model)
        file.attrs["model_config"] = json.dumps(model.config.to_dict())
        for name, pair in lora_factors(model).items():
            for key, variable in zip(("lora_kernel_a", "lora_kernel_b"), pair, strict=True):
                file.create_dataset(f"{name}/{key}", data=ops.convert_to_numpy(variable))
    write_bytes_atomic(path, buffer.getvalue())
    return path


def read_adapter_settings(path, flag="--adapter"):
    """The settings of an adapter file, checked without a backend.

    Returns:
        dict: `rank`, `alpha`, `targets`, `base_fingerprint`.

    Raises:
        FileNotFoundError, ValueError: one line naming `flag` and the file.

    Example:

    >>> read_adapter_settings("runs/my-domain-lora/adapter.lora")["rank"]
    8
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{flag} {path}: no such file; expected {EXPECTED}.")
    try:
        with h5py.File(path, "r") as file:
            if file.attrs.get("format") != FORMAT:
                raise ValueError("holds no adapter")
            version = int(file.attrs.get("format_version", 0))
            settings = json.loads(file.attrs["settings"])
            settings["base_fingerprint"] = str(file.attrs["base_fingerprint"])
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise ValueError(f"{flag} {path}: not {EXPECTED} ({error})") from None
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{flag} {path}: adapter format {version}, this version reads {FORMAT_VERSION} "
            "(format 1 holds per-head attention factors: train the adapter again, or use its "
            "run's merged model.keras)"
        )
    if sorted(set(SETTINGS) - set(settings)):
        raise ValueError(f"{flag} {path}: not {EXPECTED} (settings {settings})")
    return settings


def apply_adapter(model, path, flag="--adapter"):
    """Enables LoRA on `model` with an adapter file's settings and factors (not merged).

    Args:
        model: the base `Seq2SeqTransformer` (no LoRA yet), built.
        path: str, the adapter file.
        flag: str, how the file was given, for errors.

    Returns:
        `model`.

    Raises:
        ValueError: one line: not an adapter, an adapter of another base model
            (its fingerprint differs from the model's weights'), or a model
            that has LoRA already.

    Example:

    >>> model, tokenizer = load_translation_model("opus-mt-en-de.keras")
    >>> apply_adapter(model, "runs/my-domain-lora/adapter.lora").lora_settings["targets"]
    'query+value'
    """
    settings = read_adapter_settings(path, flag)
    if model.lora_settings:
        raise ValueError(f"{flag} {path}: the model has LoRA adapters already")
    fingerprint = weights_fingerprint(model)
    if fingerprint != settings["base_fingerprint"]:
        raise ValueError(
            f"{flag} {path}: made for another base model (its weights' fingerprint "
            f"{settings['base_fingerprint'][:12]}..., this model's {fingerprint[:12]}...)"
        )
    from keras_transformer.models.lora import lora_factors

    model.enable_lora(settings["rank"], targets=settings["targets"], alpha=settings["alpha"])
    with h5py.File(path, "r") as file:
        for name, pair in lora_factors(model).items():
            for key, variable in zip(("lora_kernel_a", "lora_kernel_b"), pair, strict=True):
                value = np.asarray(file[f"{name}/{key}"]) if f"{name}/{key}" in file else None
                if value is None or value.shape != tuple(variable.shape):
                    raise ValueError(f"{flag} {path}: lacks or misshapes {name}/{key}")
                variable.assign(value)
    return model
