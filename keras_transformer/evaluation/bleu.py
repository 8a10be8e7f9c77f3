"""Detokenized sacreBLEU and chrF, through sacrebleu's Python API.

These are the scores to report today: sacreBLEU tokenizes the detokenized
output itself, so scores from different systems compare without knowing
their preprocessing, and its signature records every setting. See
`tokenized_bleu.py` for the paper-comparable tokenized BLEU.
"""

from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF


def reference_sets(hypotheses, references):
    """Checks hypotheses and references and returns the references as sets.

    Args:
        hypotheses: sequence of str, one segment per entry.
        references: either one reference set (a sequence of str as long as
            `hypotheses`) or several (a sequence of such sequences).

    Returns:
        A list of reference sets, each a list of str of `len(hypotheses)`.

    Example:

    >>> reference_sets(["a b"], ["a c"])
    [['a c']]
    >>> reference_sets(["a b"], [["a c"], ["a b"]])
    [['a c'], ['a b']]
    """
    _check_segments("hypotheses", hypotheses)
    if not len(hypotheses):
        raise ValueError("`hypotheses` is empty: there is nothing to score.")
    if isinstance(references, str) or not isinstance(references, Sequence) or not references:
        raise TypeError(
            "`references` must be a non-empty sequence of str (one reference set) or of "
            f"sequences of str (several sets). Received: {_describe(references)}"
        )
    sets = [references] if isinstance(references[0], str) else list(references)
    for index, reference_set in enumerate(sets):
        name = "references" if len(sets) == 1 else f"references[{index}]"
        _check_segments(name, reference_set)
        if len(reference_set) != len(hypotheses):
            raise ValueError(
                f"`{name}` has {len(reference_set)} segments but `hypotheses` has "
                f"{len(hypotheses)}: every reference set needs one segment per hypothesis."
            )
    return [list(reference_set) for reference_set in sets]


def sacre_bleu(hypotheses, references, tokenize="13a", lowercase=False):
    """Corpus sacreBLEU of detokenized hypotheses, with its signature.

    With the defaults this is the WMT standard: cased, sacreBLEU's "13a"
    tokenization (that of mteval-v13a.pl), exponential smoothing. It is
    the same number as `sacrebleu REF -i HYP -m bleu`.

    Args:
        hypotheses: sequence of str, detokenized system outputs.
        references: one reference set (sequence of str) or several.
        tokenize: str. sacreBLEU tokenizer ("13a", "intl", "zh", "none", ...).
        lowercase: bool. Case-insensitive BLEU; changes the signature.

    Returns:
        `(score, signature)`: BLEU in [0, 100] and sacreBLEU's signature
        string, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0".

    Example:

    >>> score, signature = sacre_bleu(["Das Haus ist klein."], ["Das Haus ist klein."])
    >>> round(score, 2), signature
    (100.0, 'nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0')
    """
    sets = reference_sets(hypotheses, references)
    metric = BLEU(tokenize=tokenize, lowercase=lowercase)
    score = metric.corpus_score(list(hypotheses), sets)
    # The signature records the number of references, known only once scored.
    return score.score, str(metric.get_signature())


def chrf(hypotheses, references, word_order=0, lowercase=False):
    """Corpus chrF (Popovic, 2015) with sacreBLEU's defaults, with its signature.

    Character n-grams up to 6, beta = 2: the same number as
    `sacrebleu REF -i HYP -m chrf`. chrF needs no tokenization, so it is
    robust to detokenization details and rewards partially correct words
    (useful for German compounds and inflections).

    Args:
        hypotheses: sequence of str, detokenized system outputs.
        references: one reference set (sequence of str) or several.
        word_order: int. 0 for chrF, 2 for chrF++.
        lowercase: bool. Case-insensitive chrF; changes the signature.

    Returns:
        `(score, signature)`: chrF in [0, 100] and sacreBLEU's signature string.

    Example:

    >>> score, signature = chrf(["Das Haus ist klein."], ["Das Haus ist klein."])
    >>> score
    100.0
    """
    sets = reference_sets(hypotheses, references)
    metric = CHRF(word_order=word_order, lowercase=lowercase)
    score = metric.corpus_score(list(hypotheses), sets)
    return score.score, str(metric.get_signature())


def _check_segments(name, segments):
    if isinstance(segments, str) or not isinstance(segments, Sequence):
        raise TypeError(
            f"`{name}` must be a sequence of str, one segment per entry. "
            f"Received: {_describe(segments)}"
        )
    for index, segment in enumerate(segments):
        if not isinstance(segment, str):
            raise TypeError(
                f"`{name}[{index}]` must be a str. Received: {type(segment).__name__} "
                f"{segment!r:.60}"
            )


def _describe(value):
    if isinstance(value, str):
        return f"the str {value!r:.60}"
    return f"a {type(value).__name__}"
