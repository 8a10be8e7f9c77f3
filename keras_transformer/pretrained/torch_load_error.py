"""One line for a `torch.load(..., weights_only=True)` failure, in the terms of the user's file."""

import re

# torch's own explanation of a weights-only refusal starts after this marker.
_REFUSAL_MARKER = "WeightsUnpickler error:"
_REFUSED_GLOBAL = re.compile(r"GLOBAL (\S+) was not an allowed global")


def torch_load_error(path, error, expected):
    """A `ValueError` naming `path` for an exception of `torch.load` with `weights_only=True`.

    A file that pickles more than the safe loader accepts (a class, a function) is said to
    be so, naming the first refused object, with what was expected: no advice to load it
    unsafely. Any other failure (a damaged or foreign file) is "not a readable torch file",
    with the first sentence of torch's reason.

    Args:
        path: str, the file given to `torch.load`.
        error: the exception `torch.load` raised.
        expected: str, what the file should hold ("a state dict of tensors").

    Returns:
        A `ValueError` with a one-line message.

    Example:

    >>> try:
    ...     torch.load(path, weights_only=True)
    ... except Exception as error:
    ...     raise torch_load_error(path, error, "a state dict of tensors") from None
    """
    text = str(error)
    if _REFUSAL_MARKER in text:
        refused = _REFUSED_GLOBAL.search(text)
        reason = text.split(_REFUSAL_MARKER, 1)[1]
        detail = refused.group(1) if refused else _first_sentence(reason)
        return ValueError(
            f"{path}: holds Python objects beyond tensors and plain data, which the safe "
            f"loader refuses to unpickle ({detail}); expected {expected}"
        )
    return ValueError(f"{path}: not a readable torch file ({_first_sentence(text)})")


def _first_sentence(text, limit=200):
    sentence = " ".join(text.split()).split(". ")[0].rstrip(".")
    return sentence if len(sentence) <= limit else sentence[: limit - 3] + "..."
