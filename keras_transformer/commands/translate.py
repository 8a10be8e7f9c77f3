"""`keras-transformer translate`: sentences in (a file or stdin), translations out, in a stream.

Example:

    head -100 test.en | keras-transformer translate --model runs/base/model.keras
    echo "A dog runs." | keras-transformer translate --model Helsinki-NLP/opus-mt-en-de
    keras-transformer translate --run-dir runs/base --input test.en --output test.hyp.de
"""

import argparse
import contextlib
import dataclasses
import gzip
import os
import sys
import zlib

from keras_transformer.commands.target_files import TargetFiles, read_target_files
from keras_transformer.commands.translation_writer import FORMATS, TranslationWriter
from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.utils.command_line import OneLineErrorParser, add_verbose_flag
from keras_transformer.utils.config_arguments import add_config_arguments, parsed_config
from keras_transformer.utils.dataclass_config import DataclassConfig, setting
from keras_transformer.utils.live_line import is_terminal
from keras_transformer.utils.numeric_settings import check_int
from keras_transformer.utils.run_directory import RunDirectory, resolve_model_file
from keras_transformer.utils.same_file import check_output_is_not_an_input, check_output_writable

PROG = "keras-transformer translate"

DESCRIPTION = """\
Translate one sentence per line with beam search (paper 6.1: beam 4, alpha 0.6, at most 50
output tokens beyond the input's), or with --search greedy or sampling (--temperature, --top-k,
--top-p, --seed; --n-best N draws N samples per line, most probable first; the same seed gives
the same samples). --target-prefix FILE forces the first words of each translation and
--constraints FILE makes given target phrases appear in it (one line per input line).

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


@dataclasses.dataclass(frozen=True)
class TranslateOptions(DataclassConfig):
    """What `translate` reads and writes; the decoding itself is a `DecodingConfig`."""

    model: tuple[str, ...] | None = setting(
        None,
        "A .keras file of save_translation_model (model and tokenizer), a run directory, a "
        "Marian / OPUS-MT folder, a fairseq checkpoint (or its folder), or a Hugging Face id "
        "(Helsinki-NLP/opus-mt-en-de; downloaded once into huggingface_hub's cache). Several "
        "(--model A --model B): an ensemble averaging their probabilities at each step; their "
        "tokenizers must be the same.",
        metavar="PATH",
        group="model",
        required=True,
        action="extend",
    )
    run_dir: str | None = setting(
        None,
        "A training run's directory (a recipe's --output-dir): translate its model.keras.",
        metavar="RUN",
        group="model",
        required=True,
    )
    adapter: str | None = setting(
        None,
        "LoRA adapters (a `train --lora-rank` run's adapter.lora) applied to --model without "
        "merging; an adapter trained on another model is refused.",
        metavar="ADAPTER",
    )
    input: str = setting(
        "-", "Sentences, one per line (plain or gzip); - for stdin.", metavar="FILE"
    )
    output: str = setting("-", "Translations; - for stdout.", metavar="FILE")
    format: str = setting("text", "How translations are written (Formats above).", choices=FORMATS)
    chunk_size: int = setting(
        1000,
        "Lines read, sorted by length, translated and written at a time (memory holds one "
        "chunk); 1 translates each line as it comes.",
        metavar="N",
    )
    progress: bool = setting(
        False,
        "Report progress on stderr even when it is not a terminal (then a line every 30 s "
        "and at the end).",
    )
    target_prefix: str | None = setting(
        None,
        "Target prefixes, one line per input line: each translation starts with its line's "
        "words, forced during the first steps (an empty line: none); with any --search.",
        metavar="FILE",
    )
    constraints: str | None = setting(
        None,
        "Target phrases, one line per input line, separated by tabs (an empty line: none): "
        "each must appear in the translation (lexically constrained beam search, at most 16 "
        "phrases of 16 tokens a line). The share of phrases found is reported on stderr.",
        metavar="FILE",
    )

    def __post_init__(self):
        self.check_types()
        check_int(self.chunk_size, "chunk_size", minimum=1)


def build_parser(prog=PROG):
    """The command's argument parser.

    Returns:
        `(parser, added)`: the parser and, for `TranslateOptions` and
        `DecodingConfig`, the fields its flags set.
    """
    parser = OneLineErrorParser(
        prog=prog, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    added = add_config_arguments(parser, TranslateOptions())
    add_verbose_flag(parser)
    return parser, (added, add_config_arguments(parser, DecodingConfig()))


def check_paths(parser, options):
    """Exits with a one-line error (status 2) for an --input or --output that cannot be used."""
    if options.output != "-":
        try:
            check_output_is_not_an_input(options.output, [("--input", options.input)])
        except ValueError as error:
            parser.error(str(error))
        if os.path.isdir(options.output):
            parser.error(f"--output {options.output} is a directory; give a file name")
        try:
            check_output_writable(options.output)
        except PermissionError as error:
            parser.fail(error)
    if options.input != "-" and not os.path.exists(options.input):
        parser.error(f"--input {options.input}: no such file")
    if options.adapter is not None:
        from keras_transformer.export.lora_adapter import read_adapter_settings

        try:
            read_adapter_settings(options.adapter)  # an adapter file, before the backend loads
        except (OSError, ValueError) as error:
            parser.error(str(error))


def _model_sources(parser, options):
    """The `ModelSource`s of each --model (a file, folder or Hugging Face id) or of --run-dir."""
    from keras_transformer.pretrained.model_source import ModelSource, find_model_source

    try:
        if options.run_dir is not None:
            path = RunDirectory.existing(options.run_dir).model_file()
            return [ModelSource(options.run_dir, "keras", resolve_model_file(path, "translate"))]
        if options.adapter is not None and len(options.model) > 1:
            parser.error("--adapter applies to one --model, not to an ensemble")
        return [find_model_source(model, "translate") for model in options.model]
    except (ValueError, ImportError) as error:
        parser.error(f"--{'run-dir' if options.run_dir is not None else 'model'} {error}")


def _load_models(model_sources):
    """`(model or list of models, tokenizer)`; ValueError when the tokenizers differ."""
    from keras_transformer.pretrained.model_source import load_model_source

    loaded = [load_model_source(source) for source in model_sources]
    tokenizer = loaded[0][1]
    for source, (_, other) in zip(model_sources[1:], loaded[1:], strict=True):
        if not _same_tokenizer(tokenizer, other):
            raise ValueError(
                f"--model {source.name} has another tokenizer than --model "
                f"{model_sources[0].name}; an ensemble's models must share one"
            )
    models = [model for model, _ in loaded]
    return (models if len(models) > 1 else models[0]), tokenizer


def _same_tokenizer(first, second):
    if type(first) is not type(second):
        return False
    if hasattr(first, "sentencepiece_files"):
        return first.sentencepiece_files() == second.sentencepiece_files()
    return first.get_config() == second.get_config()


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


def translate(options, decoding, model_sources, stdout, target_files=None):
    """Loads the model and streams the input through it; returns the exit status.

    On JAX the compiled searches are kept in the user's cache directory
    (`keras_transformer.backend.compilation_cache`): a later run with a model
    of the same sizes loads them instead of compiling again.
    """
    from keras_transformer import backend
    from keras_transformer.utils.compilation_cache import user_cache_directory

    with backend.compilation_cache(user_cache_directory()):
        return _translate_stream(options, decoding, model_sources, stdout, target_files)


def _translate_stream(options, decoding, model_sources, stdout, target_files):
    from keras_transformer.decoding import Translator
    from keras_transformer.text.line_chunks import LineChunks
    from keras_transformer.utils.count_progress import CountProgress

    try:
        model, tokenizer = _load_models(model_sources)
        if options.adapter is not None:
            from keras_transformer.export.lora_adapter import apply_adapter

            apply_adapter(model, options.adapter)
        limit = min(
            decoding.kept_source_length(each.config)
            for each in (model if isinstance(model, list) else [model])
        )
        decoding = decoding.replace(max_source_length=limit)
    except (ValueError, OSError, ImportError) as error:
        _warn(f"error: {' '.join(str(error).split())}")
        return 2
    translator = Translator(model, tokenizer, decoding=decoding)
    show_progress = options.progress or is_terminal(sys.stderr)
    progress = CountProgress(None, "lines") if show_progress else None
    target_files = target_files or TargetFiles()
    try:
        # An error leaves an existing --output as it was (atomic_output).
        with _open_input(options.input) as source, _open_output(options.output, stdout) as target:
            chunks = LineChunks(source, options.chunk_size)
            writer = TranslationWriter(target, options.format)
            for chunk in chunks:
                given = target_files.take(len(chunk))
                writer.write(translator.translate_n_best(chunk, verbose=0, **given))
                if progress is not None:
                    progress.add(len(chunk))
            if target_files.position != (target_files.count or 0):
                raise ValueError(
                    f"the input has {target_files.position} lines, fewer than the "
                    f"{target_files.count} of {target_files.flags()}"
                )
    except (EOFError, zlib.error, gzip.BadGzipFile) as error:
        detail = " ".join(str(error).split()) or type(error).__name__
        kept = "" if options.output == "-" else f"; --output {options.output} is left as it was"
        corrupt = f"--input {options.input} is a truncated or corrupt gzip file"
        _warn(f"error: {corrupt} ({detail}){kept}")
        return 2
    except ValueError as error:
        kept = "" if options.output == "-" else f"; --output {options.output} is left as it was"
        _warn(f"error: {' '.join(str(error).split())}{kept}")
        return 2
    if progress is not None:
        progress.close()
    _report(chunks, translator, writer, decoding.max_source_length)
    if target_files.constraints is not None:
        found, given = translator.phrases_found, translator.phrases_given
        share = f" ({100 * found / given:.1f}%)" if given else ""
        print(
            f"Constraints: {found} of {given} phrases{share} appear in the output.", file=sys.stderr
        )
    return 0


def _report(chunks, translator, writer, max_source_length):
    """Warns on stderr about what the input made the command change."""
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


def main(argv=None, prog=PROG):
    """Runs the command.

    Args:
        argv: list of str arguments; None reads `sys.argv`.
        prog: str, the command as typed, for usage and errors.

    Returns:
        int, the exit status: 0 on success, 2 for a bad invocation or model,
        1 when the output cannot be written.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, (added, decoding_added) = build_parser(prog)
    arguments = parser.parse_args(argv)
    options = parsed_config(parser, TranslateOptions(), arguments, added)
    decoding = parsed_config(parser, DecodingConfig(), arguments, decoding_added)
    check_paths(parser, options)
    target_files = read_target_files(parser, options, decoding.search)
    if target_files.constraints is not None and decoding.search == "beam":
        decoding = decoding.replace(search="constrained")
    model_sources = _model_sources(parser, options)
    sys.stdout.flush()
    stdout = getattr(sys.stdout, "buffer", None) or sys.stdout
    # Whatever Keras or TensorFlow print (progress bars, messages) goes to stderr: stdout
    # carries only the translations.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            return translate(options, decoding, model_sources, stdout, target_files)
        except BrokenPipeError:
            # The reader went away (`| head`): stop quietly, as a Unix filter does.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
            return 1
        except OSError as error:
            message = f"{error.strerror}: {error.filename}" if error.filename else str(error)
            _warn(f"error: {message}")
            return 1
