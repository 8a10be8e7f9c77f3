"""Scoring a hypothesis file against reference files."""

import os

from keras_transformer.evaluation.bleu import chrf, sacre_bleu
from keras_transformer.evaluation.evaluation_scores import (
    DEFAULT_METRICS,
    METRICS,
    EvaluationScores,
)
from keras_transformer.evaluation.tokenized_bleu import multi30k_bleu, tokenized_bleu
from keras_transformer.text import text_files

__all__ = ["DEFAULT_METRICS", "METRICS", "read_lines", "score_files"]


def read_lines(path):
    """Reads a UTF-8 text file as a list of segments, one per line.

    Lines are split on "\\n" only and trailing whitespace (so "\\r" too)
    is stripped, as the `sacrebleu` command does, so scores agree with it.
    A final newline does not start an extra (empty) segment.

    Args:
        path: str or path-like.

    Returns:
        list of str.

    Example:

    >>> hypotheses = read_lines("newstest2014.hyp.de")
    """
    return [line.rstrip() for line in text_files.read_lines(path)]


def score_files(
    hypotheses,
    references,
    metrics=DEFAULT_METRICS,
    language="de",
    lowercase=False,
):
    """Scores a hypothesis file against one or more reference files.

    Args:
        hypotheses: path of the detokenized system output, one segment per line.
        references: path, or list of paths, of detokenized references,
            each with as many lines as `hypotheses`.
        metrics: names from `METRICS`: "bleu" (sacreBLEU + signature),
            "chrf" (+ signature), "tokenized_bleu" (paper-comparable),
            "multi30k_bleu" (lowercased tokenized).
        language: str. Moses tokenizer language of the target side, for the
            tokenized BLEU variants.
        lowercase: bool. Case-insensitive "bleu" and "chrf" (their signatures
            say `case:lc`), for a model trained on case-folded text.

    Returns:
        An `EvaluationScores`; metrics not requested are None.

    Example:

    >>> scores = score_files("newstest2014.hyp.de", "newstest2014.de")
    >>> print(scores.format())
    """
    if isinstance(metrics, str):
        metrics = (metrics,)
    unknown = [name for name in metrics if name not in METRICS]
    if unknown or not metrics:
        raise ValueError(
            f"`metrics` must be a non-empty list of names from {list(METRICS)}. "
            f"Received: {list(metrics)}"
        )
    reference_paths = [references] if isinstance(references, (str, os.PathLike)) else references
    if not reference_paths:
        raise ValueError("`references` must name at least one reference file. Received: []")
    hypothesis_lines = read_lines(hypotheses)
    if not hypothesis_lines:
        raise ValueError(f"The hypothesis file {os.fspath(hypotheses)} is empty.")
    reference_sets = []
    for path in reference_paths:
        lines = read_lines(path)
        if len(lines) != len(hypothesis_lines):
            raise ValueError(
                f"Line counts differ: hypothesis file {os.fspath(hypotheses)} has "
                f"{len(hypothesis_lines)} lines but reference file {os.fspath(path)} has "
                f"{len(lines)}."
            )
        reference_sets.append(lines)

    scores = {}
    if "bleu" in metrics:
        scores["bleu"], scores["bleu_signature"] = sacre_bleu(
            hypothesis_lines, reference_sets, lowercase=lowercase
        )
    if "chrf" in metrics:
        scores["chrf"], scores["chrf_signature"] = chrf(
            hypothesis_lines, reference_sets, lowercase=lowercase
        )
    if "tokenized_bleu" in metrics:
        scores["tokenized_bleu"] = tokenized_bleu(hypothesis_lines, reference_sets, language)
    if "multi30k_bleu" in metrics:
        scores["multi30k_bleu"] = multi30k_bleu(hypothesis_lines, reference_sets, language)
    return EvaluationScores(
        num_segments=len(hypothesis_lines), num_references=len(reference_sets), **scores
    )
