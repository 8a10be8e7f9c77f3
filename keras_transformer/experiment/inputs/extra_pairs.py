"""Extra parallel files a run trains on besides its training split (e.g. back-translations).

`--extra-source FILE --extra-target FILE` add one pair of line-aligned files to
the training data only (validation and test are unchanged). With `--tag-extra`
every extra source line starts with the reserved tag `EXTRA_TAG`, as in tagged
back-translation (Caswell et al., 2019): the model can tell synthetic sources
from real ones. A vocabulary the run trains keeps the tag as one piece.

The file checks are plain Python (no backend): `check_extra_files` runs before
TensorFlow, JAX or torch loads.
"""

import base64
import dataclasses
import json
import logging
import os
import sys
import zipfile

from keras_transformer.text import ParallelCorpus
from keras_transformer.text.text_files import open_binary
from keras_transformer.utils.run_directory import TOKENIZER_MEMBER

logger = logging.getLogger("keras_transformer.experiment")
# The tag of tagged extra sources. Lowercase, so that case-folded vocabularies
# (--vocabulary-lowercase) match it too.
EXTRA_TAG = "<bt>"
# The vocabulary piece of the tag: SentencePiece marks the space before a word with U+2581,
# so "<bt> source words" is the piece, then the words' own pieces.
EXTRA_TAG_PIECE = "\u2581" + EXTRA_TAG


def extra_files(data):
    """`(source, target)` paths of an `ExtraDataConfig`'s extra pair, or None without one."""
    if data.extra_source is None:
        return None
    return data.extra_source, data.extra_target


def _count_lines(path):
    """The number of lines `read_lines` would read from `path` (plain or gzip)."""
    with open_binary(path) as file:
        return sum(1 for _ in file)


def check_extra_files(data):
    """Raises for a missing extra file, or extra files of different line counts.

    Args:
        data: the run's `ExtraDataConfig`.

    Raises:
        FileNotFoundError: an extra file that does not exist (one line with its flag).
        ValueError: the extra files' line counts differ, or they are empty.
    """
    paths = extra_files(data)
    if paths is None:
        return
    flags = ("--extra-source", "--extra-target")
    for flag, path in zip(flags, paths, strict=True):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{flag} {path} does not exist (or is not a file).")
    counts = [_count_lines(path) for path in paths]
    if counts[0] != counts[1]:
        raise ValueError(
            f"--extra-target {paths[1]} has {counts[1]} lines but --extra-source {paths[0]} "
            f"has {counts[0]}: the extra files must be line-aligned."
        )
    if not counts[0]:
        raise ValueError(f"--extra-source {paths[0]} and --extra-target {paths[1]} are empty.")


def training_files(data, train):
    """The files a run trains on: the training split's `train` paths, then the extra pair's.

    Args:
        data: the run's `ExtraDataConfig`.
        train: the training split's `(source, target)` paths, or None (TFDS).

    Returns:
        A tuple of paths, or None when there are none (fingerprinted in `config.json`).
    """
    paths = tuple(train or ()) + tuple(extra_files(data) or ())
    return paths or None


def with_extra_pairs(data, corpus, verbose=False):
    """`corpus` followed by the extra pairs, their sources tagged with `--tag-extra`.

    Args:
        data: the run's `ExtraDataConfig`.
        corpus: the training split's `ParallelCorpus`.
        verbose: bool, also print the count on stderr.

    Returns:
        A `ParallelCorpus` (`corpus` itself without extra files).
    """
    paths = extra_files(data)
    if paths is None:
        return corpus
    extra = ParallelCorpus.from_files(*paths)
    sources = extra.sources
    if data.tag_extra:
        sources = [f"{EXTRA_TAG} {sentence}" for sentence in sources]
    message = (
        f"Training pairs: {len(corpus)} from the training split and {len(extra)} extra from "
        f"{paths[0]}, {paths[1]}" + (f" (sources tagged {EXTRA_TAG})" if data.tag_extra else "")
    )
    logger.info(message)
    if verbose:
        print(message, file=sys.stderr)
    return dataclasses.replace(
        corpus,
        sources=corpus.sources + tuple(sources),
        targets=corpus.targets + extra.targets,
    )


def vocabulary_symbols(data):
    """The user-defined pieces a run's trained vocabulary needs: the tag with `--tag-extra`."""
    return (EXTRA_TAG_PIECE,) if data.tag_extra else ()


def check_tag_piece(pieces, where):
    """Raises ValueError when a vocabulary lacks the tag's piece (`--tag-extra` needs it).

    Args:
        pieces: a container of the vocabulary's pieces.
        where: str, the vocabulary's flag and file, for the message.
    """
    if EXTRA_TAG_PIECE not in pieces:
        raise ValueError(
            f"--tag-extra needs the piece {EXTRA_TAG_PIECE!r} in the vocabulary, which {where} "
            "lacks (train its SentencePiece model with user_defined_symbols="
            f"{EXTRA_TAG_PIECE}, or let the run train its vocabulary)."
        )


def check_vocabulary_tag(data, proto, where):
    """`check_tag_piece` on a serialized SentencePiece model, when the run tags extra sources.

    Args:
        data: the run's `ExtraDataConfig`.
        proto: bytes, the SentencePiece model.
        where: str, the vocabulary's flag and file, for the message.
    """
    if not data.tag_extra:
        return
    import sentencepiece

    pieces = set()
    if proto:  # none: a tokenizer that is no SentencePiece model
        processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        pieces = {processor.id_to_piece(index) for index in range(processor.get_piece_size())}
    check_tag_piece(pieces, where)


def check_init_from_tag(data, path):
    """`check_vocabulary_tag` on the `--init-from` model file's SentencePiece vocabulary.

    Plain Python: the tokenizer's configuration is read from the `.keras`
    archive. A tokenizer with no single SentencePiece model (an imported
    Marian or fairseq model's) cannot hold the tag, and is refused too.

    Args:
        data: the run's `ExtraDataConfig`.
        path: str, the `--init-from` model file (already checked to be one).
    """
    if not data.tag_extra:
        return
    with zipfile.ZipFile(path) as archive:
        tokenizer = json.loads(archive.read(TOKENIZER_MEMBER))
    proto = tokenizer.get("config", {}).get("proto")
    check_vocabulary_tag(data, base64.b64decode(proto) if proto else b"", f"--init-from {path}")
