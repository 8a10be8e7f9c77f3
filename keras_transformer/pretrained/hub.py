"""`hub_snapshot`: a Hugging Face model's files, from huggingface_hub's download cache.

Only the files a translation model needs come down: a Marian / OPUS-MT model's config,
tokenizer and `model.safetensors` (`pytorch_model.bin` where a repository has no
safetensors file), or a `model.keras` written by this package. huggingface_hub keeps them in
its cache (`HF_HUB_CACHE`, by default `~/.cache/huggingface/hub`); with `HF_HUB_OFFLINE=1`
they are found there without a connection.
"""

import functools
import importlib
import os

HUB_EXTRA = "hub"
# The files a translation model needs; the weights of other frameworks (TensorFlow, Rust,
# Flax) stay on the Hub.
MODEL_PATTERNS = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "source.spm",
    "target.spm",
    "vocab.json",
    "model.safetensors",
    "model.keras",
)
FALLBACK_WEIGHTS = "pytorch_model.bin"


@functools.cache
def huggingface_hub():
    """The `huggingface_hub` module, imported once.

    Raises:
        ImportError: one line naming the extra that installs it.
    """
    try:
        return importlib.import_module("huggingface_hub")
    except ImportError:
        raise ImportError(
            "a Hugging Face model id needs huggingface_hub: pip install "
            f"'keras-transformer-mt[{HUB_EXTRA}]'"
        ) from None


@functools.cache
def hub_snapshot(repo_id):
    """The local folder of Hugging Face model `repo_id`, downloaded once into the cache.

    Each id is looked up once per process; later calls return the same folder.

    Args:
        repo_id: str, `ORG/NAME` (e.g. "Helsinki-NLP/opus-mt-en-de").

    Returns:
        str, the snapshot folder in huggingface_hub's cache.

    Raises:
        ImportError: huggingface_hub is not installed.
        ValueError: one line: the model is not on the Hub (or is gated or
            private), or not in the cache while the Hub cannot be reached.

    Example:

    >>> hub_snapshot("Helsinki-NLP/opus-mt-en-de")  # doctest: +SKIP
    '/home/me/.cache/huggingface/hub/models--Helsinki-NLP--opus-mt-en-de/snapshots/...'
    """
    hub = huggingface_hub()
    try:
        folder = hub.snapshot_download(repo_id, allow_patterns=list(MODEL_PATTERNS))
        if os.path.isfile(os.path.join(folder, "vocab.json")) and not os.path.isfile(
            os.path.join(folder, "model.safetensors")
        ):
            folder = hub.snapshot_download(repo_id, allow_patterns=[FALLBACK_WEIGHTS])
    except Exception as error:  # huggingface_hub's errors, whichever its version raises
        raise ValueError(_message(hub, repo_id, error)) from None
    return folder


def _message(hub, repo_id, error):
    """One line for a failed download, by huggingface_hub's error class."""
    names = {kind.__name__ for kind in type(error).__mro__}
    if "LocalEntryNotFoundError" in names:
        constants = getattr(hub, "constants", None)
        cache = getattr(constants, "HF_HUB_CACHE", "huggingface_hub's cache")
        offline = getattr(constants, "HF_HUB_OFFLINE", False)
        why = "HF_HUB_OFFLINE is set" if offline else "the Hub cannot be reached"
        return (
            f"{repo_id}: not in the Hugging Face cache ({cache}) and {why}; load it once with "
            "a connection (unset HF_HUB_OFFLINE)"
        )
    if "GatedRepoError" in names:
        return (
            f"{repo_id}: a gated model on the Hugging Face Hub; accept its terms and log in "
            "(hf auth login)"
        )
    if "RepositoryNotFoundError" in names:
        return (
            f"{repo_id}: no such file or folder, nor a model on the Hugging Face Hub (a private "
            "one needs hf auth login)"
        )
    if "RevisionNotFoundError" in names:
        return f"{repo_id}: the Hugging Face Hub has no such revision"
    detail = " ".join(str(error).split())[:300]
    return (
        f"{repo_id}: cannot download from the Hugging Face Hub ({type(error).__name__}: {detail})"
    )
