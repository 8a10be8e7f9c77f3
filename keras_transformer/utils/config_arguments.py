"""A command line generated from a config dataclass: one flag per field, help from the field.

A field made with `setting(default, help, ...)` becomes `--field-name` (or its `flag`),
typed from its annotation: `int`, `float`, `str` take one value (`none` for an optional
field), `bool` gives `--name/--no-name`, `tuple[T, ...]` takes one or more values, and a
`dict` field with `override_of=SomeConfig` takes repeatable `FIELD=VALUE` items checked
against that dataclass's field names and types. Adding a field with help text is all a
new flag needs. A field holding a config dataclass of its own (its value a dataclass
instance, e.g. `ExperimentConfig.data`) gives that config's flags, in an argument group
titled by the field's `title` metadata; its `skip` metadata names fields without a flag.
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
            raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (expected one of {shown})")
        return value

    convert.__name__ = flag
    convert.kind = kind  # the field's type, for whoever inspects the parser
    return convert


def _shown(default):
    if isinstance(default, tuple | list):
        return " ".join(str(item) for item in default) or "none"
    if isinstance(default, dict):
        return ", ".join(f"{k}={v}" for k, v in default.items()) or "none"
    return "none" if default is None else str(default)


def add_config_arguments(parser, defaults, skip=()):
    """Adds a flag for every field of the dataclass instance `defaults`.

    A field whose value is a dataclass instance (a nested config) adds that
    config's fields instead, in an argument group; its flags' `dest` is the
    field path, e.g. `"data.vocabulary_size"`.

    Args:
        parser: an `argparse.ArgumentParser`.
        defaults: a dataclass instance; its values are the flags' defaults.
        skip: field names without a flag.

    Returns:
        `{dest: field}` of the flags added (`config_changes` reads them back).
    """
    return _add_arguments(parser, defaults, skip, prefix="")


def _add_arguments(parser, defaults, skip, prefix):
    cls = type(defaults)
    kinds = field_types(cls)
    hints = typing.get_type_hints(cls)
    added = {}
    groups = {}
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if field.name in skip:
            continue
        if dataclasses.is_dataclass(default) and not isinstance(default, type):
            group = parser.add_argument_group(field.metadata.get("title", field.name))
            nested_skip = field.metadata.get("skip", ())
            added.update(_add_arguments(group, default, nested_skip, f"{prefix}{field.name}."))
            continue
        flag = flag_of(field)
        if flag is None or "help" not in field.metadata:
            continue
        kind, optional = kinds[field.name]
        optional = optional and not _is_required(field)  # a required value is never none
        help_text = _help_text(field, default)
        options = {"dest": prefix + field.name, "help": help_text}
        if "metavar" in field.metadata:
            options["metavar"] = field.metadata["metavar"]
        choices = field.metadata.get("choices")
        if kind is dict:
            options.update(action="append", default=[])
        elif kind is bool:
            options.update(action=argparse.BooleanOptionalAction, default=default)
        elif kind is tuple:
            item = _tuple_item(hints[field.name])
            options.update(nargs="+", default=default, type=_typed(item, False, choices, flag))
        else:
            options.update(default=default, type=_typed(kind, optional, choices, flag))
        if choices is not None and "metavar" not in options and kind is not bool:
            options["metavar"] = "{" + ",".join(str(choice) for choice in choices) + "}"
        elif "metavar" not in options and kind is not bool:
            options["metavar"] = field.name.upper()  # argparse's, without the `dest` path
        _add_argument(parser, flag, field, options, groups)
        added[prefix + field.name] = field
    return added


def _is_required(field):
    return bool(field.metadata.get("required") or field.metadata.get("positional"))


def _help_text(field, default):
    """The field's help, with its default unless the argument is required."""
    text = field.metadata["help"]
    if not _is_required(field):
        text = f"{text} Default: {_shown(default)}."
    return text.replace("%", "%%")


def _tuple_item(hint):
    """The item type of `tuple[T, ...]` or `tuple[T, ...] | None`."""
    if typing.get_origin(hint) is not tuple:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return typing.get_args(hint)[0]


def _add_argument(parser, flag, field, options, groups):
    """Adds one field's argument, as its metadata asks.

    Metadata beyond `flag`, `choices` and `metavar` (all optional):
    `positional=True` (an argument named by its place; required),
    `group=NAME` (flags of one NAME are mutually exclusive; the group is
    required when a member says `required=True`), `required=True`,
    `aliases` (more flag names), `nargs="?"` with `const` (a flag whose
    value may be left out), `action="extend"` (a tuple field's flag that
    may be repeated, its values joined).
    """
    metadata = field.metadata
    options.update({key: metadata[key] for key in ("nargs", "const", "action") if key in metadata})
    if metadata.get("positional"):
        del options["dest"], options["default"]
        parser.add_argument(field.name, **options)
        return
    target = parser
    if "group" in metadata:
        if metadata["group"] not in groups:
            groups[metadata["group"]] = parser.add_mutually_exclusive_group()
        target = groups[metadata["group"]]
        target.required = target.required or bool(metadata.get("required"))
    elif metadata.get("required"):
        options["required"] = True
    target.add_argument(flag, *metadata.get("aliases", ()), **options)


def config_changes(defaults, arguments, added):
    """The fields of `defaults` that the parsed `arguments` change, dict flags parsed.

    Args:
        defaults: the dataclass instance given to `add_config_arguments`.
        arguments: the `argparse.Namespace`.
        added: what `add_config_arguments` returned.

    Returns:
        dict of field values for `dataclasses.replace` (override dicts merged
        over the defaults' own); a nested config's changes are a dict under
        its field's name, e.g. `{"data": {"vocabulary_size": 8000}}`.
    """
    changes = {}
    for dest, field in added.items():
        *path, name = dest.split(".")
        owner, target = defaults, changes
        for step in path:
            owner = getattr(owner, step)
            target = target.setdefault(step, {})
        value = getattr(arguments, dest)
        if isinstance(value, list) and field.metadata.get("override_of") is not None:
            if value:
                parsed = parse_overrides(
                    value,
                    field.metadata["override_of"],
                    flag_of(field),
                    field.metadata.get("override_fields"),
                )
                target[name] = {**getattr(owner, name), **parsed}
        elif isinstance(value, list):
            target[name] = tuple(value)
        elif value != getattr(owner, name):
            target[name] = value
    return {name: value for name, value in changes.items() if value != {} or name in added}


def parsed_config(parser, defaults, arguments, added):
    """`defaults` with the parsed `arguments` applied; a bad value exits 2 naming its flag.

    For a command's flat options dataclass (one of `keras_transformer/commands/`): the
    config's message names its fields as `numeric_settings` does ("`beam_size` must be
    >= 1. Received: beam_size=0"); the user reads the flags ("--beam-size must be >= 1.
    Received: 0").

    Args:
        parser: the `OneLineErrorParser` (its `error` ends the process).
        defaults: the dataclass instance given to `add_config_arguments`.
        arguments: the `argparse.Namespace`.
        added: what `add_config_arguments` returned.

    Returns:
        The config (`dataclasses.replace` runs its checks).
    """
    try:
        return dataclasses.replace(defaults, **config_changes(defaults, arguments, added))
    except ValueError as error:
        message = " ".join(str(error).split())
        for name, field in added.items():
            message = message.replace(f"`{name}`", flag_of(field))
            message = message.replace(f"Received: {name}=", "Received: ")
        parser.error(message)
