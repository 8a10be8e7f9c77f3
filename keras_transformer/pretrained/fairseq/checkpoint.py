"""Reading a fairseq checkpoint (`checkpoint_best.pt`, `model.pt`) without fairseq or its code.

A fairseq checkpoint is a `torch.save` pickle: `{"args": argparse.Namespace, "model": state
dict, ...}` (fairseq < 0.10) or `{"cfg": {"model": ..., "task": ...}, "model": ...}`, read
as torch_checkpoint.py reads any checkpoint: no code from the file runs.
"""

from keras_transformer.pretrained.torch_checkpoint import UnreadObject, plain
from keras_transformer.pretrained.torch_checkpoint import load_checkpoint as load_torch_file

EXPECTED_CONTENT = "a fairseq checkpoint of tensors and settings"
__all__ = ["UnreadObject", "checkpoint_settings", "load_checkpoint"]


def load_checkpoint(path):
    """The object a fairseq checkpoint holds, loaded without running its code.

    Raises:
        ImportError: torch is not installed.
        ValueError: the file is not a torch checkpoint; the message names it.
    """
    return load_torch_file(path, EXPECTED_CONTENT)


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
