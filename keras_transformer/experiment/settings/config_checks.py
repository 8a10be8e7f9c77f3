"""The small value checks the experiment's configs share in their `__post_init__`."""


def check_choices(config, **choices):
    """Raises ValueError naming the first field whose value is not one of its choices.

    Example:

    >>> check_choices(config, final_model=("average", "best", "last"))
    """
    for name, allowed in choices.items():
        value = getattr(config, name)
        if value not in allowed:
            raise ValueError(f"`{name}` must be one of {allowed}. Received: {name}={value!r}")


def check_at_least(config, minimum, *names):
    """Raises ValueError for the first of the fields `names` below `minimum` (None passes)."""
    for name in names:
        value = getattr(config, name)
        if value is not None and value < minimum:
            raise ValueError(f"`{name}` must be >= {minimum}. Received: {name}={value!r}")


def check_positive(config, *names):
    """Raises ValueError for the first of the number fields `names` not > 0 (None passes)."""
    for name in names:
        value = getattr(config, name)
        if value is not None and not value > 0:
            raise ValueError(f"`{name}` must be > 0. Received: {name}={value!r}")
