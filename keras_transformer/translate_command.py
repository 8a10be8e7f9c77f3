"""`keras-transformer translate`: sentences in (a file or stdin), translations out, in a stream.

Example:

    head -100 test.en | keras-transformer translate --model runs/base/model.keras
    keras-transformer translate --run-dir runs/base --input test.en --output test.hyp.de
"""

import argparse
import contextlib
import gzip
import json
import math
import os
import sys
import zlib

from keras_transformer.decoding.length_penalty_rules import LENGTH_PENALTY_RULES
from keras_transformer.utils.command_line import OneLineErrorParser
from keras_transformer.utils.live_line import is_terminal
from keras_transformer.utils.numeric_settings import check_decoding_settings, check_int
from keras_transformer.utils.run_directory import RunDirectory, resolve_model_file
from keras_transformer.utils.same_file import check_output_is_not_an_input

PROG = "keras-transformer translate"
FORMATS = ("text", "tsv", "jsonl")
# The flags of the decoding settings, as `check_decoding_settings` names them.
DECODING_FLAGS = {
    "beam_size": "--beam-size",
    "alpha": "--alpha",
    "max_extra_length": "--max-extra-length",
    "max_source_length": "--max-source-length",
    "num_results": "--n-best",
}

DESCRIPTION = """\
Translate one sentence per line with beam search (paper 6.1: beam 4, alpha 0.6, at most 50
output tokens beyond the input's).

Standard output (or --output) holds only the translations, one line per input line (--n-best K:
K lines per input line, best first), written and flushed chunk by chunk (--chunk-size lines, or
fewer when a pipe or terminal pauses): it works in pipes, interactively and on files larger than
memory. An --output file is written to a temporary file beside it and renamed at the end, so an
interrupted run never leaves half a file. Progress goes to standard error, only when it is a
terminal (or with --progress). Invalid UTF-8 in the input becomes U+FFFD, as in the SavedModel.

Formats:
  text   the translation.
  tsv    LINE<tab>RANK<tab>SCORE<tab>TRANSLATION: the input's line number (from 1), the
         hypothesis' rank (1 = best), its length-penalized log-probability, the translation
         (the last column: split on the first three tabs).
  jsonl  one object per input line: {"line", "translation", "score", "n_best": [{"translation",
         "score"}, ...]}; a slot with no hypothesis has score null.
"""


def build_parser():
    """The command's argument parser.

    Returns:
        An `argparse.ArgumentParser`.
    """
    parser = OneLineErrorParser(
        prog=PROG, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model",
        metavar="PATH",
        help="A .keras file of save_translation_model (model and tokenizer), or a run directory.",
    )
    source.add_argument(
        "--run-dir",
        metavar="RUN",
        help="A training run's directory (a recipe's --output-dir): translate its model.keras.",
    )
    parser.add_argument(
        "--input",
        default="-",
        metavar="FILE",
        help="Sentences, one per line (plain or gzip); - for stdin.",
    )
    parser.add_argument("--output", default="-", metavar="FILE", help="Translations; - for stdout.")
    parser.add_argument("--format", choices=FORMATS, default="text", help="Default: text.")
    parser.add_argument(
        "--n-best",
        type=int,
        default=1,
        metavar="K",
        help="Hypotheses per line, <= --beam-size. Default: 1.",
    )
    parser.add_argument(
        "--beam-size", type=int, default=4, metavar="N", help="Beam width (paper: 4)."
    )
    parser.add_argument(
        "--alpha", type=float, default=0.6, help="Length penalty exponent (paper: 0.6)."
    )
    parser.add_argument(
        "--length-penalty-rule",
        choices=LENGTH_PENALTY_RULES,
        default="gnmt",
        help="How finished hypotheses are ranked: gnmt (paper: log-prob / ((5 + length) / 6) "
        "** alpha) or average (log-prob / length ** alpha, transformers' length_penalty).",
    )
    parser.add_argument(
        "--max-extra-length",
        type=int,
        default=50,
        metavar="N",
        help="Output tokens allowed beyond the input's (paper: 50).",
    )
    parser.add_argument(
        "--max-source-length",
        type=int,
        metavar="N",
        help="Source tokens kept (EOS included); longer sentences are cut, and counted on stderr. "
        "Default: the exported SavedModel's (the model's max_position; with learned positions, "
        "max_position - max-extra-length - 1).",
    )
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=4096,
        metavar="N",
        help="Upper bound on sentences x padded length of one batch. Default: 4096.",
    )
    parser.add_argument(
        "--batch-size", type=int, metavar="N", help="Upper bound on sentences per batch."
    )
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=1000,
        metavar="N",
        help="Lines read, sorted by length, translated and written at a time (memory holds one "
        "chunk). Default: 1000; 1 translates each line as it comes.",
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help="Report progress on stderr even when it is not a terminal (then a line every 30 s "
        "and at the end).",
    )
    return parser


def check_arguments(parser, args):
    """Exits with a one-line error (status 2) on values out of range."""
    try:
        check_decoding_settings(
            names=DECODING_FLAGS,
            beam_size=args.beam_size,
            alpha=args.alpha,
            max_extra_length=args.max_extra_length,
            max_source_length=args.max_source_length,
            num_results=args.n_best,
        )
        for flag, value in (
            ("--batch-tokens", args.batch_tokens),
            ("--batch-size", args.batch_size),
            ("--chunk-size", args.chunk_size),
        ):
            check_int(value, flag, minimum=1, optional=True)
    except ValueError as error:
        parser.error(str(error))
    if args.output != "-":
        try:
            check_output_is_not_an_input(args.output, [("--input", args.input)])
        except ValueError as error:
            parser.error(str(error))
        if os.path.isdir(args.output):
            parser.error(f"--output {args.output} is a directory; give a file name")
    if args.input != "-" and not os.path.exists(args.input):
        parser.error(f"--input {args.input}: no such file")


def _model_file(parser, args):
    try:
        if args.run_dir is not None:
            return RunDirectory(args.run_dir).model_file()
        return resolve_model_file(args.model, "translate")
    except ValueError as error:
        parser.error(f"--{'run-dir' if args.run_dir is not None else 'model'} {error}")


def _score(score):
    return score if math.isfinite(score) else None


class _Writer:
    """Formats one chunk's n-best lists and writes them, then flushes."""

    def __init__(self, stream, output_format):
        self.stream = stream
        self.format = output_format
        self.lines = 0
        self.line_breaks = 0

    def _one_line(self, text):
        if "\n" in text or "\r" in text:
            self.line_breaks += 1
            text = text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
        return text

    def write(self, n_best):
        out = []
        for hypotheses in n_best:
            self.lines += 1
            if self.format == "jsonl":
                record = {
                    "line": self.lines,
                    "translation": hypotheses[0][0],
                    "score": _score(hypotheses[0][1]),
                    "n_best": [{"translation": t, "score": _score(s)} for t, s in hypotheses],
                }
                out.append(json.dumps(record, ensure_ascii=False, allow_nan=False))
                continue
            for rank, (text, score) in enumerate(hypotheses, start=1):
                text = self._one_line(text)
                out.append(
                    text if self.format == "text" else f"{self.lines}\t{rank}\t{score:.6f}\t{text}"
                )
        self.stream.write("".join(f"{line}\n" for line in out).encode("utf-8"))
        self.stream.flush()


@contextlib.contextmanager
def _open_output(path, stdout):
    if path == "-":
        yield stdout
        return
    from keras_transformer.text.text_files import atomic_output

    with atomic_output(path, "wb") as file:
        yield file


@contextlib.contextmanager
def _open_input(path):
    if path == "-":
        yield sys.stdin.buffer
        return
    from keras_transformer.text.text_files import open_binary

    # A named pipe is read as it is: sniffing it for gzip would consume its first bytes.
    with open_binary(path) if os.path.isfile(path) else open(path, "rb") as file:
        yield file


def _warn(message):
    print(f"{PROG}: {message}", file=sys.stderr)


def translate(args, stdout):
    """Loads the model and streams the input through it; returns the exit status."""

    from keras_transformer.decoding import Translator
    from keras_transformer.export import load_translation_model
    from keras_transformer.export.export_saved_model import (
        check_max_source_length,
        default_max_source_length,
    )
    from keras_transformer.text.line_chunks import LineChunks
    from keras_transformer.utils.count_progress import CountProgress

    try:
        model, tokenizer = load_translation_model(args.model_file, compile=False)
        max_source_length = args.max_source_length or default_max_source_length(
            model.config, args.max_extra_length
        )
        check_max_source_length(model.config, args.max_extra_length, max_source_length)
    except (ValueError, OSError) as error:
        _warn(f"error: {' '.join(str(error).split())}")
        return 2
    translator = Translator(
        model,
        tokenizer,
        beam_size=args.beam_size,
        alpha=args.alpha,
        length_penalty_rule=args.length_penalty_rule,
        max_extra_length=args.max_extra_length,
        max_source_length=max_source_length,
        batch_tokens=args.batch_tokens,
        batch_size=args.batch_size,
        num_results=args.n_best,
    )
    show_progress = args.progress or is_terminal(sys.stderr)
    progress = CountProgress(None, "lines") if show_progress else None
    try:
        # An error leaves an existing --output as it was (atomic_output).
        with _open_input(args.input) as source, _open_output(args.output, stdout) as target:
            chunks = LineChunks(source, args.chunk_size)
            writer = _Writer(target, args.format)
            for chunk in chunks:
                writer.write(translator.translate_n_best(chunk, verbose=0))
                if progress is not None:
                    progress.add(len(chunk))
    except (EOFError, zlib.error, gzip.BadGzipFile) as error:
        detail = " ".join(str(error).split()) or type(error).__name__
        kept = "" if args.output == "-" else f"; --output {args.output} is left as it was"
        _warn(f"error: --input {args.input} is a truncated or corrupt gzip file ({detail}){kept}")
        return 2
    if progress is not None:
        progress.close()
    if chunks.replaced:
        _warn(
            f"{chunks.replaced} input lines had invalid UTF-8, read with U+FFFD in its place "
            f"(first: line {chunks.first_replaced})"
        )
    if translator.truncated:
        _warn(
            f"{translator.truncated} sentences were longer than {max_source_length} tokens "
            "(EOS included) and were cut (--max-source-length)"
        )
    if writer.line_breaks:
        # One line per input keeps the output aligned with the input file.
        _warn(f"{writer.line_breaks} translations had line breaks, written as spaces")
    return 0


def main(argv=None):
    """Runs the command.

    Args:
        argv: list of str arguments; None reads `sys.argv`.

    Returns:
        int, the exit status: 0 on success, 2 for a bad invocation or model,
        1 when the output cannot be written.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    args.model_file = _model_file(parser, args)
    sys.stdout.flush()
    stdout = getattr(sys.stdout, "buffer", None) or sys.stdout
    # Whatever Keras or TensorFlow print (progress bars, messages) goes to stderr: stdout
    # carries only the translations.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            return translate(args, stdout)
        except BrokenPipeError:
            # The reader went away (`| head`): stop quietly, as a Unix filter does.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
            return 1
        except OSError as error:
            message = f"{error.strerror}: {error.filename}" if error.filename else str(error)
            _warn(f"error: {message}")
            return 1
