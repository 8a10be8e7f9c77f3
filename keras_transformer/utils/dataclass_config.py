"""Dict conversion and type checks for the package's config dataclasses."""

import dataclasses
import difflib
import types
import typing

from keras_transformer.utils.numeric_settings import check_float, check_int


def field_types(cls):
    """`{name: (base type, optional)}` of a config dataclass's fields.

    `int | None` gives `(int, True)`; `dict`, `tuple`, `str`, `float`, `bool`,
    `int` are the types the configs use.
    """
    hints = typing.get_type_hints(cls)
    result = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        optional = False
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            arguments = [a for a in typing.get_args(hint) if a is not type(None)]
            optional = len(arguments) < len(typing.get_args(hint))
            hint = arguments[0]
        result[field.name] = (typing.get_origin(hint) or hint, optional)
    return result


def type_name(kind, optional=False):
    """How a field's type reads in an error: "an int", "a float or None"."""
    names = {int: "an int", float: "a number", bool: "true or false", str: "a string"}
    name = names.get(kind, f"a {kind.__name__}")
    return f"{name} or None" if optional else name


def value_has_type(value, kind, optional=False):
    """Whether `value` fits a field of type `kind` (an int fits a float field)."""
    if value is None:
        return optional
    if kind is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def unknown_name_message(cls, name):
    """`"TransformerConfig has no field 'num_layer' (did you mean num_layers?)"`."""
    known = [field.name for field in dataclasses.fields(cls)]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(known)}"
    return f"{cls.__name__} has no field {name!r} ({hint})"


class DataclassConfig:
    """Mixin for config dataclasses: `from_dict` naming unknown keys, `to_dict`, `replace`,
    and `check_types` for `__post_init__`."""

    @classmethod
    def from_dict(cls, config):
        """Builds a config from a dict (e.g. read from JSON), naming unknown keys in the error.

        JSON lists become tuples for tuple fields.
        """
        if not isinstance(config, dict):
            raise ValueError(
                f"{cls.__name__} settings must be a dict. Received: {type(config).__name__}"
            )
        unknown = sorted(set(config) - {field.name for field in dataclasses.fields(cls)})
        if unknown:
            raise ValueError("; ".join(unknown_name_message(cls, name) for name in unknown))
        kinds = field_types(cls)
        config = {
            name: tuple(value) if kinds[name][0] is tuple and isinstance(value, list) else value
            for name, value in config.items()
        }
        return cls(**config)

    def to_dict(self):
        return dataclasses.asdict(self)

    def replace(self, **changes):
        """A copy with `changes` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    def check_types(self):
        """Raises ValueError naming the first field whose value has the wrong type.

        Numbers are checked too (`numeric_settings`): a float field must be
        finite, an int field within int64, so no config holds a value that
        only fails (or silently overflows) deep in a run.
        """
        for name, (kind, optional) in field_types(type(self)).items():
            value = getattr(self, name)
            if not value_has_type(value, kind, optional):
                raise ValueError(
                    f"`{name}` must be {type_name(kind, optional)}. Received: {name}={value!r}"
                )
            if value is None or isinstance(value, bool):
                continue
            if kind is int:
                check_int(value, name)
            elif kind is float:
                check_float(value, name)
            elif kind is tuple:
                for item in value:
                    if isinstance(item, int) and not isinstance(item, bool):
                        check_int(item, name)
                    elif isinstance(item, float):
                        check_float(item, name)

    @classmethod
    def fields_with(cls, key, value=True):
        """The names of the fields whose metadata `key` is `value`, in field order.

        Example:

        >>> DecodingConfig.fields_with("served")
        ('search', 'beam_size', ...)
        """
        return tuple(
            field.name for field in dataclasses.fields(cls) if field.metadata.get(key) == value
        )

    def check_settings(self):
        """Raises ValueError naming the first field outside its metadata's range or choices.

        A field's metadata may bound it: `minimum` and `maximum` (inclusive),
        `above` and `below` (exclusive, numbers only), `choices` (the allowed values); None
        passes in an optional field. The command line shows the same words
        with the flag (`parsed_config`), before any backend loads.
        """
        bounds = ("minimum", "maximum", "above", "below")
        for field in dataclasses.fields(self):
            value, metadata = getattr(self, field.name), field.metadata
            choices = metadata.get("choices")
            if choices is not None and value is not None and value not in choices:
                raise ValueError(
                    f"`{field.name}` must be one of {tuple(choices)}. "
                    f"Received: {field.name}={value!r}"
                )
            limits = {bound: metadata[bound] for bound in bounds if bound in metadata}
            if not limits or value is None:
                continue
            if isinstance(value, int) and not isinstance(value, bool):
                check_int(value, field.name, limits.get("minimum"), limits.get("maximum"))
            else:
                check_float(value, field.name, **limits)


def setting(default, help, **metadata):
    """A config dataclass field carrying its help text (the command line's `--help`).

    Args:
        default: the default value (immutable; a dict field uses
            `dataclasses.field(default_factory=dict, metadata={"help": ...})`).
        help: str, what the setting does, with the paper section where relevant.
        **metadata: more for the generated command line: `flag` (its name when
            not `--field-name`, or None for no flag), `choices`, `metavar`; for
            the commands' options also `positional`, `group`, `required`,
            `aliases`, `nargs` and `const` (`config_arguments._add_argument`);
            the range and choices `check_settings` enforces (`minimum`,
            `maximum`, `above`, `below`, `choices`).
    """
    return dataclasses.field(default=default, metadata={"help": help, **metadata})
