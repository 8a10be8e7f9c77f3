"""The one check of every numeric setting: finite, in range, within int64.

The configs (`TransformerConfig`, `ExperimentConfig`, `PipelineConfig`, through
`DataclassConfig.check_types`), the decoding settings (`DecodingConfig`, whose
ranges its fields' metadata give: `DataclassConfig.check_settings`) and the commands' own flags
(`translate`, `export`, `average`, `plot`) all call these functions, so one value
gets one answer everywhere: the command line and the Python API refuse the same
values with the same words. Plain Python: parsing a command line imports no
TensorFlow through here.
"""

import math
import numbers

# Step counts, sizes and seeds end up in int64 tensors and files.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def _label(name):
    """`name` as a message shows it: a flag as it is, a Python name in backticks."""
    return name if name.startswith("-") else f"`{name}`"


def _received(name, value):
    return f"Received: {value!r}" if name.startswith("-") else f"Received: {name}={value!r}"


def check_int(value, name, minimum=None, maximum=None, optional=False):
    """Raises `ValueError` unless `value` is an int in `[minimum, maximum]` and in int64.

    Args:
        value: the setting.
        name: str, a Python name ("beam_size", shown in backticks) or a flag
            ("--beam-size", shown as it is).
        minimum: int or None.
        maximum: int or None (int64's maximum either way).
        optional: bool, whether None is allowed.

    Returns:
        `value`.

    Example:

    >>> check_int(2**64, "--max-steps", minimum=1)
    ValueError: --max-steps must be <= 9223372036854775807 (the int64 maximum). Received: ...
    """
    if value is None and optional:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        kind = "an int or None" if optional else "an int"
        raise ValueError(f"{_label(name)} must be {kind}. {_received(name, value)}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{_label(name)} must be >= {minimum}. {_received(name, value)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{_label(name)} must be <= {maximum}. {_received(name, value)}")
    if value > INT64_MAX:
        raise ValueError(
            f"{_label(name)} must be <= {INT64_MAX} (the int64 maximum). {_received(name, value)}"
        )
    if value < INT64_MIN:
        raise ValueError(
            f"{_label(name)} must be >= {INT64_MIN} (the int64 minimum). {_received(name, value)}"
        )
    return value


def check_float(value, name, minimum=None, maximum=None, above=None, below=None, optional=False):
    """Raises `ValueError` unless `value` is a finite number in the given range.

    Args:
        value: the setting (an int is a number too; bool is not).
        name: str, a Python name or a flag (see `check_int`).
        minimum, maximum: inclusive bounds, or None.
        above, below: exclusive bounds, or None.
        optional: bool, whether None is allowed.

    Returns:
        `value`.

    Example:

    >>> check_float(float("inf"), "alpha", minimum=0)
    ValueError: `alpha` must be a finite number. Received: alpha=inf
    """
    if value is None and optional:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        kind = "a number or None" if optional else "a number"
        raise ValueError(f"{_label(name)} must be {kind}. {_received(name, value)}")
    if not math.isfinite(value):
        raise ValueError(f"{_label(name)} must be a finite number. {_received(name, value)}")
    for bound, holds, words in (
        (minimum, lambda b: value >= b, ">="),
        (above, lambda b: value > b, ">"),
        (maximum, lambda b: value <= b, "<="),
        (below, lambda b: value < b, "<"),
    ):
        if bound is not None and not holds(bound):
            raise ValueError(f"{_label(name)} must be {words} {bound}. {_received(name, value)}")
    return value
