"""A config dataclass's settings as a table: name, type, default and help.

The API reference (docs/hooks/api_reference.py) shows each config's fields with this, from
the same field metadata that `add_config_arguments` makes the command line's flags and
`--help` from.
"""

import dataclasses
import types
import typing


def type_text(hint):
    """How a field's type reads: "int", "int | None", "tuple[str, ...]", "DataConfig"."""
    if hint is type(None):
        return "None"
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return " | ".join(type_text(argument) for argument in typing.get_args(hint))
    origin = typing.get_origin(hint)
    if origin is not None:
        arguments = ", ".join(
            "..." if argument is Ellipsis else type_text(argument)
            for argument in typing.get_args(hint)
        )
        return f"{origin.__name__}[{arguments}]"
    return getattr(hint, "__name__", str(hint))


def default_text(field):
    """How a field's default reads: its repr, "(required)", or the nested config's name."""
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is dataclasses.MISSING:
        return "(required)"
    value = field.default_factory()
    if dataclasses.is_dataclass(value):
        return f"{type(value).__name__}()"
    return repr(value)


def help_text(field, hint):
    """The field's help; for a nested config, what it groups (its `title`) and its class."""
    if "help" in field.metadata:
        return field.metadata["help"]
    if dataclasses.is_dataclass(hint):
        title = field.metadata.get("title", field.name)
        return f"{title[0].upper()}{title[1:]}: the `{hint.__name__}` fields."
    return ""


def config_fields(cls):
    """The rows of a config dataclass's reference, in field order.

    Args:
        cls: a dataclass (a `DataclassConfig`, `Preset`, ...).

    Returns:
        list of `(name, type, default, help)` tuples of str.

    Example:

    >>> config_fields(TransformerConfig)[1]
    ('num_layers', 'int', '6', 'N: identical layers in the encoder and in the decoder (3.1).')
    """
    hints = typing.get_type_hints(cls)
    return [
        (
            field.name,
            type_text(hints[field.name]),
            default_text(field),
            help_text(field, hints[field.name]),
        )
        for field in dataclasses.fields(cls)
    ]


def config_table(cls):
    """A markdown table of `config_fields(cls)`: Field, Type, Default, Description."""

    def cell(text):  # a pipe inside a code span is no column separator; elsewhere escaped
        return " ".join(text.split()).replace("|", "\\|")

    lines = ["| Field | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for name, kind, default, description in config_fields(cls):
        lines.append(f"| `{name}` | `{kind}` | `{default}` | {cell(description)} |")
    return "\n".join(lines)
