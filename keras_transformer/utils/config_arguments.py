"""A command line generated from a config dataclass: one flag per field, help from the field.

A field made with `setting(default, help, ...)` becomes `--field-name` (or its `flag`),
typed from its annotation: `int`, `float`, `str` take one value (`none` for an optional
field), `bool` gives `--name/--no-name`, `tuple[T, ...]` takes one or more values, and a
`dict` field with `override_of=SomeConfig` takes repeatable `FIELD=VALUE` items checked
against that dataclass's field names and types. Adding a field with help text is all a
new flag needs.
"""

import argparse
import dataclasses
import json
import typing

from keras_transformer.utils.dataclass_config import field_types, type_name, unknown_name_message

NONE_WORDS = ("none", "null")
TRUE_WORDS = ("true", "yes", "1")
FALSE_WORDS = ("false", "no", "0")


def flag_of(field):
    """The command-line flag of a dataclass field: its `flag` metadata or `--field-name`."""
    return field.metadata.get("flag", "--" + field.name.replace("_", "-"))


def parse_value(text, kind, optional=False):
    """`text` as a value of a field of type `kind`; ValueError names what was expected.

    Example:

    >>> parse_value("2", int), parse_value("none", float, optional=True)
    (2, None)
    """
    if optional and text.strip().lower() in NONE_WORDS:
        return None
    expected = type_name(kind, optional)
    try:
        if kind is bool:
            word = text.strip().lower()
            if word not in TRUE_WORDS + FALSE_WORDS:
                raise ValueError
            return word in TRUE_WORDS
        if kind is int:
            return int(text)
        if kind is float:
            value = float(text)
            if value != value:  # NaN passes no range check
                raise ValueError
            return value
        if kind is str:
            return json.loads(text) if text.startswith('"') else text
        value = json.loads(text)
        if not isinstance(value, kind):
            raise ValueError
        return value
    except ValueError:
        raise ValueError(f"expected {expected}, received {text!r}") from None


def parse_overrides(items, cls, flag, allowed=None):
    """`{field: value}` from `FIELD=VALUE` strings, each checked against dataclass `cls`.

    Args:
        items: list of str.
        cls: the dataclass whose fields are set.
        flag: str, the flag named in errors, e.g. "--model-override".
        allowed: field names that may be set; None for all.

    Raises:
        ValueError: a malformed item, an unknown or disallowed field ("did you
            mean ...?"), or a value of the wrong type.
    """
    kinds = field_types(cls)
    allowed = tuple(kinds) if allowed is None else tuple(allowed)
    overrides = {}
    for item in items:
        name, separator, text = item.partition("=")
        name = name.strip()
        if not separator or not name:
            raise ValueError(f"{flag} takes FIELD=VALUE. Received: {item!r}")
        if name not in kinds:
            raise ValueError(f"{flag} {item}: {unknown_name_message(cls, name)}")
        if name not in allowed:
            raise ValueError(
                f"{flag} {item}: {name} is set by the run itself; this flag sets "
                f"{', '.join(allowed)}"
            )
        try:
            overrides[name] = parse_value(text, *kinds[name])
        except ValueError as error:
            raise ValueError(f"{flag} {item}: {name} {error}") from None
    return overrides


def _typed(kind, optional, choices, flag):
    def convert(text):
        try:
            value = parse_value(text, kind, optional)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        if choices is not None and value is not None and value not in choices:
            shown = ", ".join(str(choice) for choice in choices)
            raise argparse.ArgumentTypeError(f"expected one of {shown}, received {text!r}")
        return value

    convert.__name__ = flag
    return convert


def _shown(default):
    if isinstance(default, tuple | list):
        return " ".join(str(item) for item in default) or "none"
    if isinstance(default, dict):
        return ", ".join(f"{k}={v}" for k, v in default.items()) or "none"
    return "none" if default is None else str(default)


def add_config_arguments(parser, defaults, skip=()):
    """Adds a flag for every field of the dataclass instance `defaults`.

    Args:
        parser: an `argparse.ArgumentParser`.
        defaults: a dataclass instance; its values are the flags' defaults.
        skip: field names without a flag.

    Returns:
        `{dest: field}` of the flags added (`config_changes` reads them back).
    """
    cls = type(defaults)
    kinds = field_types(cls)
    hints = typing.get_type_hints(cls)
    added = {}
    for field in dataclasses.fields(cls):
        flag = flag_of(field)
        if field.name in skip or flag is None or "help" not in field.metadata:
            continue
        kind, optional = kinds[field.name]
        default = getattr(defaults, field.name)
        help_text = f"{field.metadata['help']} Default: {_shown(default)}.".replace("%", "%%")
        options = {"dest": field.name, "help": help_text}
        if "metavar" in field.metadata:
            options["metavar"] = field.metadata["metavar"]
        choices = field.metadata.get("choices")
        if kind is dict:
            options.update(action="append", default=[])
        elif kind is bool:
            options.update(action=argparse.BooleanOptionalAction, default=default)
        elif kind is tuple:
            item = typing.get_args(hints[field.name])[0]
            options.update(nargs="+", default=default, type=_typed(item, False, choices, flag))
        else:
            options.update(default=default, type=_typed(kind, optional, choices, flag))
        if choices is not None and "metavar" not in options and kind is not bool:
            options["metavar"] = "{" + ",".join(str(choice) for choice in choices) + "}"
        parser.add_argument(flag, **options)
        added[field.name] = field
    return added


def config_changes(defaults, arguments, added):
    """The fields of `defaults` that the parsed `arguments` change, dict flags parsed.

    Args:
        defaults: the dataclass instance given to `add_config_arguments`.
        arguments: the `argparse.Namespace`.
        added: what `add_config_arguments` returned.

    Returns:
        dict of field values for `dataclasses.replace` (override dicts merged
        over the defaults' own).
    """
    changes = {}
    for name, field in added.items():
        value = getattr(arguments, name)
        if isinstance(value, list) and field.metadata.get("override_of") is not None:
            if value:
                flag = field.metadata.get("flag", "--" + name.replace("_", "-"))
                parsed = parse_overrides(
                    value,
                    field.metadata["override_of"],
                    flag,
                    field.metadata.get("override_fields"),
                )
                changes[name] = {**getattr(defaults, name), **parsed}
        elif isinstance(value, list):
            changes[name] = tuple(value)
        elif value != getattr(defaults, name):
            changes[name] = value
    return changes
