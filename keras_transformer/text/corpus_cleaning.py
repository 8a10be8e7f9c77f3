"""Filtering a parallel corpus: empty pairs, over-long pairs, implausible length ratios."""

import logging

from keras_transformer.text.cleaning_summary import EXAMPLES_PER_REASON, CleaningSummary
from keras_transformer.text.parallel_corpus import ParallelCorpus

logger = logging.getLogger("keras_transformer.text")


def word_count(text):
    """Whitespace-separated words, the unit of Moses' `clean-corpus-n.perl`."""
    return len(text.split())


def clean_parallel_corpus(
    corpus,
    *,
    max_length=250,
    max_length_ratio=9.0,
    length_function=word_count,
    strip=True,
):
    """Drops unusable pairs and reports every drop.

    Rules, checked in this order (a pair counts under the first it fails):
    a side empty after stripping; a side longer than `max_length`; the longer
    side more than `max_length_ratio` times the shorter. The defaults are
    those of Moses' `clean-corpus-n.perl` (ratio 9; fairseq's WMT14 recipe
    used 250 and ratio 1.5 on BPE tokens). A summary is logged (as a warning
    when anything was dropped) and returned.

    Args:
        corpus: a `ParallelCorpus`.
        max_length: int or None. Longest side kept, in `length_function`
            units; None disables the rule.
        max_length_ratio: float or None. Largest ratio of side lengths
            (longer / shorter); None disables the rule.
        length_function: callable str -> int. Length of a sentence; default
            whitespace words. Pass e.g. `lambda s: len(tokenizer.tokenize(s))`
            to count subword tokens.
        strip: bool. Remove leading and trailing whitespace from kept sentences.

    Returns:
        `(cleaned_corpus, summary)`: a `ParallelCorpus` and a `CleaningSummary`.

    Example:

    >>> corpus, summary = clean_parallel_corpus(corpus, max_length=100)
    >>> print(summary)
    """
    if not isinstance(corpus, ParallelCorpus):
        raise TypeError(f"`corpus` must be a ParallelCorpus. Received: {type(corpus).__name__}")
    if max_length is not None and (not isinstance(max_length, int) or max_length <= 0):
        raise ValueError(f"`max_length` must be None or a positive int. Received: {max_length!r}")
    if max_length_ratio is not None and not max_length_ratio >= 1.0:
        raise ValueError(f"`max_length_ratio` must be None or >= 1. Received: {max_length_ratio!r}")
    kept_sources, kept_targets = [], []
    counts = {"empty": 0, "too_long": 0, "ratio": 0}
    examples = {reason: [] for reason in counts}
    stripped = 0
    for number, (source, target) in enumerate(corpus, start=1):
        clean_source, clean_target = source.strip(), target.strip()
        reason = None
        if not clean_source or not clean_target:
            reason = "empty"
        else:
            source_length = length_function(clean_source)
            target_length = length_function(clean_target)
            longer = max(source_length, target_length)
            shorter = min(source_length, target_length)
            if max_length is not None and longer > max_length:
                reason = "too_long"
            elif max_length_ratio is not None and longer > max_length_ratio * max(shorter, 1):
                reason = "ratio"
        if reason is not None:
            counts[reason] += 1
            if len(examples[reason]) < EXAMPLES_PER_REASON:
                examples[reason].append(number)
            continue
        if strip:
            stripped += (clean_source != source) or (clean_target != target)
            source, target = clean_source, clean_target
        kept_sources.append(source)
        kept_targets.append(target)

    summary = CleaningSummary(
        total=len(corpus),
        kept=len(kept_sources),
        dropped_empty=counts["empty"],
        dropped_too_long=counts["too_long"],
        dropped_ratio=counts["ratio"],
        stripped=stripped,
        max_length=max_length,
        max_length_ratio=max_length_ratio,
        examples={reason: tuple(numbers) for reason, numbers in examples.items()},
    )
    message = f"{corpus.source_name} / {corpus.target_name}:\n{summary}"
    if summary.dropped:
        logger.warning(message)
    else:
        logger.info(message)
    if not kept_sources:
        raise ValueError(f"Cleaning dropped every pair of the corpus.\n{message}")
    cleaned = ParallelCorpus(
        kept_sources,
        kept_targets,
        source_name=corpus.source_name,
        target_name=corpus.target_name,
    )
    return cleaned, summary
