"""`keras-transformer import marian DIR --output MODEL.keras`: a Marian / OPUS-MT folder or id."""

import dataclasses
import os
import sys

from keras_transformer.utils.command_line import (
    OneLineErrorParser,
    add_verbose_flag,
    check_keras_output,
    write_model_file,
)
from keras_transformer.utils.config_arguments import add_config_arguments, parsed_config
from keras_transformer.utils.dataclass_config import DataclassConfig, setting

PROG = "keras-transformer import marian"

DESCRIPTION = """\
Write a Hugging Face Marian / OPUS-MT folder (what save_pretrained writes: config.json,
model.safetensors or pytorch_model.bin, source.spm, target.spm, vocab.json) as a translation
model file that translate, evaluate, export and train --init-from take. transformers is not
needed; pytorch_model.bin needs torch. translate --length-penalty-rule average --alpha 1 ranks
beams as transformers' generate does.
"""

# What a save_pretrained folder must hold; checked before the backend loads.
FOLDER_FILES = ("config.json", "source.spm", "target.spm", "vocab.json")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclasses.dataclass(frozen=True)
class MarianImportOptions(DataclassConfig):
    """The folder `import marian` reads and the file it writes."""

    directory: str | None = setting(
        None,
        "The save_pretrained folder, or a Hugging Face id (Helsinki-NLP/opus-mt-en-de; "
        "downloaded once into huggingface_hub's cache).",
        metavar="DIR",
        positional=True,
    )
    output: str | None = setting(
        None, "The model file to write.", metavar="MODEL.keras", required=True
    )
    overwrite: bool = setting(False, "Replace an existing --output.")

    def __post_init__(self):
        self.check_types()


def _missing_files(directory):
    missing = [name for name in FOLDER_FILES if not os.path.isfile(os.path.join(directory, name))]
    if not any(os.path.isfile(os.path.join(directory, name)) for name in WEIGHT_FILES):
        missing.append(f"{WEIGHT_FILES[0]} (or {WEIGHT_FILES[1]})")
    return missing


def _local_folder(parser, name):
    """The folder `name` means: itself, or a Hugging Face id's snapshot in the cache."""
    from keras_transformer.pretrained.model_source import is_hub_id

    if os.path.isdir(name):
        return name
    if not is_hub_id(name):
        parser.fail(
            f"{name}: not a folder, nor a Hugging Face id (ORG/NAME, e.g. "
            "Helsinki-NLP/opus-mt-en-de)"
        )
    from keras_transformer.pretrained.hub import hub_snapshot

    try:
        return hub_snapshot(name)
    except (ValueError, ImportError) as error:
        parser.fail(error)


def build_parser(prog=PROG):
    """`(parser, added)`: the parser and the `MarianImportOptions` fields its flags set."""
    parser = OneLineErrorParser(prog=prog, description=DESCRIPTION)
    add_verbose_flag(parser)
    return parser, add_config_arguments(parser, MarianImportOptions())


def main(argv=None, prog=PROG):
    """Runs the command; returns the exit status (2 and one line for a user error)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, added = build_parser(prog)
    options = parsed_config(parser, MarianImportOptions(), parser.parse_args(argv), added)
    directory = _local_folder(parser, options.directory)
    missing = _missing_files(directory)
    if missing:
        parser.fail(
            f"{options.directory}: missing {', '.join(missing)}; expected a Marian folder as "
            "save_pretrained writes it"
        )
    check_keras_output(parser, options.output, options.overwrite)
    # The backend loads here, once the arguments are checked.
    from keras_transformer.pretrained.marian import import_marian

    return write_model_file(
        parser, lambda: import_marian(directory, options.output), options.output
    )
