"""Training the shared source/target SentencePiece vocabulary (paper 5.1)."""

import io
import itertools
import logging
import os
import random

import sentencepiece as spm

from keras_transformer.text.parallel_corpus import ParallelCorpus
from keras_transformer.text.subword_tokenizer import (
    BOS_ID,
    BOS_PIECE,
    EOS_ID,
    EOS_PIECE,
    PAD_ID,
    PAD_PIECE,
    UNK_ID,
    UNK_PIECE,
    SubwordTokenizer,
)
from keras_transformer.text.text_files import read_lines, write_bytes_atomic

logger = logging.getLogger("keras_transformer.text")

MODEL_TYPES = ("bpe", "unigram")
# SentencePiece skips training sentences longer than this many bytes; we count them.
MAX_SENTENCE_BYTES = 4192
# Fixed rather than "all cores": unigram training depends on the thread count,
# so a fixed default keeps a seed's model the same on every machine.
DEFAULT_THREADS = 16


def _check_arguments(
    vocabulary_size, model_type, character_coverage, seed, max_sentences, num_threads
):
    if isinstance(vocabulary_size, bool) or not isinstance(vocabulary_size, int):
        raise TypeError(f"`vocabulary_size` must be an int. Received: {vocabulary_size!r}")
    if vocabulary_size <= len((PAD_ID, UNK_ID, BOS_ID, EOS_ID)):
        raise ValueError(
            "`vocabulary_size` must exceed the 4 special pieces. "
            f"Received: vocabulary_size={vocabulary_size}"
        )
    if model_type not in MODEL_TYPES:
        raise ValueError(f"`model_type` must be one of {MODEL_TYPES}. Received: {model_type!r}")
    if not 0.0 < character_coverage <= 1.0:
        raise ValueError(
            f"`character_coverage` must be in (0, 1]. Received: {character_coverage!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative int. Received: seed={seed!r}")
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads <= 0:
        raise ValueError(f"`num_threads` must be a positive int. Received: {num_threads!r}")
    if max_sentences is not None and (
        isinstance(max_sentences, bool) or not isinstance(max_sentences, int) or max_sentences <= 0
    ):
        raise ValueError(
            f"`max_sentences` must be None or a positive int. Received: {max_sentences!r}"
        )


class _CountingSentences:
    """Feeds sentences to the trainer, checking types and counting what it will skip."""

    def __init__(self, sentences):
        self._sentences = sentences
        self.count = 0
        self.too_long = 0
        self.empty = 0
        # SentencePiece turns exceptions raised inside the iterator into
        # RuntimeErrors; keep the original to re-raise it.
        self.error = None

    def __iter__(self):
        for index, sentence in enumerate(self._sentences):
            if not isinstance(sentence, str):
                self.error = TypeError(
                    "`sentences` must yield str. "
                    f"Received: item {index} of type {type(sentence).__name__}"
                )
                raise self.error
            self.count += 1
            if not sentence.strip():
                self.empty += 1
            elif len(sentence.encode("utf-8")) > MAX_SENTENCE_BYTES:
                self.too_long += 1
            yield sentence


def _sample(sentences, size, seed):
    """Reservoir sample of `size` sentences, in corpus order, chosen by `seed`."""
    rng = random.Random(seed)
    reservoir = []  # (position, sentence)
    total = 0
    for position, sentence in enumerate(sentences):
        total += 1
        if len(reservoir) < size:
            reservoir.append((position, sentence))
        else:
            slot = rng.randrange(position + 1)
            if slot < size:
                reservoir[slot] = (position, sentence)
    reservoir.sort()
    return [sentence for _, sentence in reservoir], total


def train_vocabulary(
    sentences,
    vocabulary_size=37000,
    *,
    model_type="bpe",
    character_coverage=1.0,
    byte_fallback=False,
    seed=0,
    max_sentences=None,
    lowercase=False,
    num_threads=DEFAULT_THREADS,
    output_path=None,
    user_symbols=(),
):
    """Trains a shared SentencePiece vocabulary with SentencePiece's own trainer.

    The paper (5.1) encodes English-German with "byte-pair encoding, which has
    a shared source-target vocabulary of about 37000 tokens": train on both
    sides together (pass a `ParallelCorpus`, or chain the two sides). Ids
    0-3 are pad, unk, begin and end (see `SubwordTokenizer`).

    Args:
        sentences: a `ParallelCorpus` (both sides are used) or an iterable of str.
        vocabulary_size: int. Number of pieces, special pieces included.
            SentencePiece raises if the text cannot support that many.
        model_type: `"bpe"` (default, as in the paper) or `"unigram"`.
        character_coverage: float in (0, 1]. Share of characters covered by
            the vocabulary; rarer characters become `<unk>` (or bytes with
            `byte_fallback`). 1.0 suits alphabetic languages, 0.9995 CJK.
        byte_fallback: bool. Spell characters outside the vocabulary as
            UTF-8 byte pieces instead of `<unk>`.
        seed: int. Chooses the `max_sentences` sample and seeds
            SentencePiece's random generator: a seed (with fixed
            `num_threads`) gives one model.
        max_sentences: int or None. Train on a random sample of this many
            sentences, drawn here with `seed` (SentencePiece's own sampler
            ignores the seed); None uses all.
        lowercase: bool. Case-fold during normalization (`nmt_nfkc_cf`).
        num_threads: int. Trainer threads. BPE models do not depend on it;
            unigram models do, so keep it fixed to reproduce one.
        output_path: str, `os.PathLike` or None. If given, the `.model` file
            is written there atomically (temporary file, then rename).
        user_symbols: sequence of str, pieces the vocabulary keeps whole
            wherever they occur in the text (SentencePiece's user-defined
            symbols, ids 4 on), e.g. a tag such as `"\u2581<bt>"`.

    Returns:
        A `SubwordTokenizer`.

    Example:

    >>> corpus = ParallelCorpus.from_files("train.en", "train.de")
    >>> tokenizer = train_vocabulary(corpus, vocabulary_size=8000,
    ...                              output_path="vocab/ende.model")
    """
    _check_arguments(
        vocabulary_size, model_type, character_coverage, seed, max_sentences, num_threads
    )
    if isinstance(sentences, ParallelCorpus):
        sentences = itertools.chain(sentences.sources, sentences.targets)
    elif isinstance(sentences, str | bytes | os.PathLike):
        raise TypeError(
            "`sentences` must be an iterable of sentences; use `train_vocabulary_from_files` "
            f"for files. Received: {sentences!r}"
        )
    iterator = iter(sentences)
    first = next(iterator, None)
    if first is None:
        raise ValueError("`sentences` is empty: cannot train a vocabulary on no text.")
    sentences = itertools.chain([first], iterator)
    if max_sentences is not None:
        sentences, total = _sample(sentences, max_sentences, seed)
        logger.info("Sampled %d of %d sentences for the vocabulary.", len(sentences), total)
    counted = _CountingSentences(sentences)

    options = {
        "vocab_size": vocabulary_size,
        "model_type": model_type,
        "character_coverage": character_coverage,
        "byte_fallback": byte_fallback,
        "normalization_rule_name": "nmt_nfkc_cf" if lowercase else "nmt_nfkc",
        "pad_id": PAD_ID,
        "unk_id": UNK_ID,
        "bos_id": BOS_ID,
        "eos_id": EOS_ID,
        "pad_piece": PAD_PIECE,
        "unk_piece": UNK_PIECE,
        "bos_piece": BOS_PIECE,
        "eos_piece": EOS_PIECE,
        "max_sentence_length": MAX_SENTENCE_BYTES,
        "num_threads": num_threads,
        "minloglevel": 2,
        **({"user_defined_symbols": list(user_symbols)} if user_symbols else {}),
    }
    spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(counted), model_writer=model, **options
        )
    except RuntimeError as error:
        if counted.error is not None:
            raise counted.error from None
        if counted.count and counted.empty == counted.count:
            raise ValueError(
                f"All {counted.count} sentences are empty: no vocabulary to train."
            ) from None
        raise ValueError(
            f"SentencePiece could not train a {model_type} vocabulary of "
            f"vocabulary_size={vocabulary_size} ({counted.count} sentences read): {error}"
        ) from None
    if counted.too_long:
        logger.warning(
            "SentencePiece skipped %d of %d training sentences longer than %d bytes.",
            counted.too_long,
            counted.count,
            MAX_SENTENCE_BYTES,
        )
    logger.info(
        "Trained a %d-piece %s vocabulary on %d sentences (%d empty).",
        vocabulary_size,
        model_type,
        counted.count,
        counted.empty,
    )
    proto = model.getvalue()
    if output_path is not None:
        write_bytes_atomic(output_path, proto)
    return SubwordTokenizer(proto=proto)


def train_vocabulary_from_files(paths, vocabulary_size=37000, *, errors="strict", **kwargs):
    """Trains a shared vocabulary on the lines of text files (plain or gzip).

    Every file is read and checked (UTF-8, existence) before training starts,
    so a bad file fails fast and nothing is written.

    Args:
        paths: a path or a list of paths, e.g. `["train.en", "train.de"]`.
        vocabulary_size: int. See `train_vocabulary`.
        errors: `"strict"` or `"replace"`, for invalid UTF-8 (see `read_lines`).
        **kwargs: the keyword arguments of `train_vocabulary`.

    Returns:
        A `SubwordTokenizer`.

    Example:

    >>> tokenizer = train_vocabulary_from_files(["train.en", "train.de.gz"], 8000)
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    paths = list(paths)
    if not paths:
        raise ValueError("`paths` is empty: name at least one text file.")
    lines = []
    for path in paths:
        file_lines = read_lines(path, errors=errors, description="vocabulary training file")
        if not file_lines:
            logger.warning("Vocabulary training file %r is empty.", os.fspath(path))
        lines.extend(file_lines)
    if not lines:
        raise ValueError(
            f"All vocabulary training files are empty: {[os.fspath(p) for p in paths]}"
        )
    return train_vocabulary(lines, vocabulary_size, **kwargs)
