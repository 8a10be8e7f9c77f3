"""The formats of published models that this package imports: one line each.

A format is a module (or a package) of `keras_transformer.pretrained` with the same parts:
its settings read as a `TransformerConfig`, its tensors read, its tokenizer, and its
tensor-name map for the shared weight setter (weight_setter.py); then, for the registry:

- `NAME`: the format's name, its `keras-transformer import NAME` command;
- `accepts_file(path)`: whether a file given as a model is one of this format;
- `find_in_folder(name, folder)`: what a folder holds of this format, or None;
- `FOLDER_HINT`, `MISSING_HINT`: how messages describe its folders;
- `FALLBACK`: True where it takes what the others do not recognize (fairseq takes any
  `.pt` file), so that it is asked last;
- `translation_model(path)`: `(model, tokenizer)`, converted in memory;

and a command, `keras_transformer/commands/import_NAME.py`. A new format is its module,
its command, one line below and its test. Importing this registry loads no format.
"""

import functools
import importlib

# name -> (the format's module, what messages call it). A format added goes last.
FORMATS = {
    "marian": ("keras_transformer.pretrained.marian", "Marian / OPUS-MT"),
    "fairseq": ("keras_transformer.pretrained.fairseq", "fairseq"),
    "opennmt": ("keras_transformer.pretrained.opennmt", "OpenNMT-py"),
}


@functools.cache
def get_format(name):
    """The module of format `name` (a key of `FORMATS`).

    Raises:
        ValueError: no such format.

    Example:

    >>> get_format("fairseq").NAME
    'fairseq'
    """
    if name not in FORMATS:
        raise ValueError(f"`name` must be one of {tuple(FORMATS)}. Received: name={name!r}")
    return importlib.import_module(FORMATS[name][0])


def summary(name):
    """What messages call format `name` ("Marian / OPUS-MT")."""
    return FORMATS[name][1]


def command_module(name):
    """The module path of `keras-transformer import NAME` (imported by the command line)."""
    return f"keras_transformer.commands.import_{name}"


def formats():
    """The format modules, in the order sources are recognized (a `FALLBACK` one last)."""
    modules = [get_format(name) for name in FORMATS]
    return sorted(modules, key=lambda module: getattr(module, "FALLBACK", False))
