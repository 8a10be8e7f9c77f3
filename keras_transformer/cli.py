"""`keras-transformer train | translate | evaluate | average | export | plot`.

Also `python -m keras_transformer COMMAND`.

Each subcommand's `--help` explains its flags. `train` runs a recipe's settings
(`--recipe`, default the quickstart) with the recipes' flags; `translate` reads
sentences from a file or stdin and writes translations to a file or stdout;
`evaluate`, `average`, `export` and `plot` are the package's `python -m
keras_transformer.{evaluation,checkpoints,export,figures}` commands.
"""

import os
import sys

from keras_transformer.utils.command_line import OneLineErrorParser

COMMANDS = ("train", "translate", "evaluate", "average", "export", "plot")
PROG = "keras-transformer"


def _train(argv):
    from keras_transformer.experiment.recipe_main import recipe_main
    from keras_transformer.experiment.recipes import RECIPES

    parser = OneLineErrorParser(prog=f"{PROG} train", add_help=False)
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="quickstart")
    known, rest = parser.parse_known_args(argv)
    needs_data = known.recipe != "quickstart"
    description = (
        f"Train with the {known.recipe!r} recipe's settings (--recipe: "
        f"{', '.join(sorted(RECIPES))}); every flag below overrides one of them."
    )
    return recipe_main(
        RECIPES[known.recipe],
        description,
        argv=rest,
        require_data=needs_data,
        prog=f"{PROG} train [--recipe NAME]",
    )


def _translate(argv):
    parser = OneLineErrorParser(
        prog=f"{PROG} translate",
        description="Translate one sentence per line with beam search (paper 6.1).",
    )
    parser.add_argument("--model", required=True, help="A .keras file of save_translation_model.")
    parser.add_argument("--input", default="-", help="Sentences, one per line; - for stdin.")
    parser.add_argument("--output", default="-", help="Translations; - for stdout.")
    parser.add_argument("--beam-size", type=int, default=4, help="Beam width (paper: 4).")
    parser.add_argument("--alpha", type=float, default=0.6, help="Length penalty (paper: 0.6).")
    parser.add_argument(
        "--max-extra-length", type=int, default=50, help="Output tokens beyond the input's."
    )
    arguments = parser.parse_args(argv)
    if arguments.beam_size < 1:
        parser.error(f"--beam-size must be >= 1. Received: {arguments.beam_size}")
    if not arguments.alpha >= 0:
        parser.error(f"--alpha must be >= 0. Received: {arguments.alpha}")
    for flag, path in (("--model", arguments.model), ("--input", arguments.input)):
        if path != "-" and not os.path.isfile(path):
            parser.fail(f"{flag} file not found: {path}")
    try:
        from keras_transformer.decoding import Translator
        from keras_transformer.export import load_translation_model
        from keras_transformer.text import read_lines
        from keras_transformer.text.text_files import join_line_breaks

        if arguments.input == "-":
            sentences = [line.rstrip("\n") for line in sys.stdin]
        else:
            sentences = read_lines(arguments.input)
        model, tokenizer = load_translation_model(arguments.model, compile=False)
        translator = Translator(
            model,
            tokenizer,
            beam_size=arguments.beam_size,
            alpha=arguments.alpha,
            max_extra_length=arguments.max_extra_length,
        )
        translations = translator.translate(sentences)
    except (ValueError, OSError) as error:
        parser.fail(error)
    translations, joined = join_line_breaks(translations)
    if joined:
        # One line per input keeps the output aligned with the input file.
        print(
            f"{PROG} translate: {joined} translations had line breaks, written as spaces",
            file=sys.stderr,
        )
    text = "".join(f"{line}\n" for line in translations)
    if arguments.output == "-":
        sys.stdout.write(text)
    else:
        from keras_transformer.text.text_files import write_bytes_atomic

        write_bytes_atomic(arguments.output, text.encode("utf-8"))
    return 0


def _delegate(module_name):
    def run(argv):
        import importlib

        return importlib.import_module(module_name).main(argv)

    return run


HANDLERS = {
    "train": _train,
    "translate": _translate,
    "evaluate": _delegate("keras_transformer.evaluation.__main__"),
    "average": _delegate("keras_transformer.checkpoints.__main__"),
    "export": _delegate("keras_transformer.export.__main__"),
    "plot": _delegate("keras_transformer.figures.__main__"),
}


def main(argv=None):
    """Runs one subcommand; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = OneLineErrorParser(prog=PROG, description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("command", choices=COMMANDS, help="What to do; COMMAND --help for more.")
    if not argv:
        parser.error(f"a command is needed: one of {', '.join(COMMANDS)}")
    if argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    arguments = parser.parse_args(argv[:1])
    return HANDLERS[arguments.command](argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
