"""Tokenized BLEU as the paper and the Multi30k literature computed it.

The paper's 27.3 / 28.4 (en-de) were computed like tensor2tensor's
`get_ende_bleu.sh`: Moses `replace-unicode-punctuation.perl` and
`tokenizer.perl -l de` on hypotheses and references, then intra-word
hyphens split into `##AT##-##AT##` tokens, then `multi-bleu.perl`. Here the
Moses scripts are `sacremoses` (a Python port) and `multi-bleu.perl` is
sacreBLEU with `tokenize="none"`, `smooth_method="none"`, which counts the
same clipped n-grams and closest (shorter on ties) reference lengths.
"""

import functools
import re

from sacrebleu.metrics import BLEU

from keras_transformer.evaluation.bleu import reference_sets

# tensor2tensor's `perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'`; Python's `re.sub`
# has the same leftmost, non-overlapping matching, so "x-y-z" gives "x ##AT##-##AT## y-z".
_INTRA_WORD_HYPHEN = re.compile(r"(\S)-(\S)")


def split_hyphenated_compounds(line):
    """Splits intra-word hyphens into `##AT##-##AT##` tokens.

    The rule of tensor2tensor's `get_ende_bleu.sh` (from Stanford NMT's
    WMT'14 data: "for historical reasons, we split compound words"),
    applied to Moses-tokenized text. German hyphenated compounds then
    count as several tokens, so a partially right compound earns n-gram
    matches and BLEU is comparable with GNMT, ConvS2S and the Transformer.

    Args:
        line: str, Moses-tokenized text.

    Returns:
        str, the line with every `a-b` (non-space on both sides of the
        hyphen) rewritten to `a ##AT##-##AT## b`.

    Example:

    >>> split_hyphenated_compounds("rich-text format")
    'rich ##AT##-##AT## text format'
    """
    return _INTRA_WORD_HYPHEN.sub(r"\1 ##AT##-##AT## \2", line)


# sacremoses is imported where it is first used: its import compiles its many patterns (about
# half a second), which every training run would pay at start for a metric few of them ask for.
@functools.lru_cache(maxsize=8)
def _tokenizer(language):
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=language)


@functools.lru_cache(maxsize=8)
def _normalizer(language):
    from sacremoses import MosesPunctNormalizer

    return MosesPunctNormalizer(lang=language)


def moses_tokenize(lines, language, replace_unicode_punctuation=False, escape=True):
    """Moses `tokenizer.perl -l LANGUAGE` (without `-a`) on each line.

    Args:
        lines: iterable of str, detokenized text.
        language: str. Language code for nonbreaking prefixes and
            apostrophe rules ("de", "en", "fr", ...).
        replace_unicode_punctuation: bool. First run Moses
            `replace-unicode-punctuation.perl` (full-width punctuation, curly
            double quotes, ellipsis, ... to ASCII), as `get_ende_bleu.sh` does.
        escape: bool. Escape `&"'<>[]|` as XML entities, as `tokenizer.perl`
            does by default (BLEU does not depend on it: the mapping is one-to-one).

    Returns:
        list of str, the tokens of each line joined by single spaces.

    Example:

    >>> moses_tokenize(["Das Haus-Boot, sagte er."], "de")
    ['Das Haus-Boot , sagte er .']
    """
    if not isinstance(language, str) or not language:
        raise ValueError(f"`language` must be a language code like 'de'. Received: {language!r}")
    tokenizer = _tokenizer(language)
    normalizer = _normalizer(language)
    tokenized = []
    for line in lines:
        if replace_unicode_punctuation:
            line = normalizer.replace_unicode_punct(line)
        tokenized.append(tokenizer.tokenize(line, return_str=True, escape=escape))
    return tokenized


def multi_bleu(hypotheses, references, lowercase=False):
    """BLEU of pre-tokenized text with `multi-bleu.perl`'s semantics.

    Tokens are whitespace-separated; n-gram counts are clipped by the
    maximum count over references; the reference length of a segment is
    the closest to the hypothesis length (the shorter one on ties); no
    smoothing, so a corpus without any matching 4-gram scores 0.

    Args:
        hypotheses: sequence of str, tokenized system outputs.
        references: one reference set (sequence of str) or several, tokenized.
        lowercase: bool. `multi-bleu.perl -lc`. Python lowercases every
            letter where Perl's byte-string `lc` lowercases only ASCII, so
            "Über" and "über" match here and not there.

    Returns:
        float, BLEU in [0, 100] (`multi-bleu.perl` prints it rounded to 2 decimals).

    Example:

    >>> round(multi_bleu(["the cat sat on the mat"], ["the cat sat on the mat"]), 2)
    100.0
    """
    sets = reference_sets(hypotheses, references)
    # force=True: the input is tokenized on purpose; sacreBLEU would warn otherwise.
    metric = BLEU(tokenize="none", smooth_method="none", lowercase=lowercase, force=True)
    return metric.corpus_score(list(hypotheses), sets).score


def tokenized_bleu(
    hypotheses,
    references,
    language="de",
    split_compounds=True,
    lowercase=False,
    replace_unicode_punctuation=True,
):
    """Paper-comparable tokenized BLEU of detokenized hypotheses.

    The pipeline of tensor2tensor's `get_ende_bleu.sh`, applied to the
    hypotheses and to the references alike: Moses punctuation replacement
    and tokenization, `##AT##` compound splitting, then `multi_bleu`.
    Compare this number (not sacreBLEU) with the paper's Table 2.

    Args:
        hypotheses: sequence of str, detokenized system outputs.
        references: one reference set (sequence of str) or several, detokenized.
        language: str. Moses language of the hypotheses and references.
        split_compounds: bool. Apply `split_hyphenated_compounds`.
        lowercase: bool. Case-insensitive (`multi-bleu.perl -lc`).
        replace_unicode_punctuation: bool. Run Moses'
            `replace-unicode-punctuation.perl` before tokenizing.

    Returns:
        float, BLEU in [0, 100].

    Example:

    >>> round(tokenized_bleu(["Das E-Mail-Konto ist neu."], ["Das E-Mail-Konto ist neu."]), 2)
    100.0
    """
    sets = reference_sets(hypotheses, references)

    def prepare(lines):
        lines = moses_tokenize(lines, language, replace_unicode_punctuation)
        if split_compounds:
            lines = [split_hyphenated_compounds(line) for line in lines]
        return lines

    return multi_bleu(prepare(hypotheses), [prepare(s) for s in sets], lowercase=lowercase)


def multi30k_bleu(hypotheses, references, language="de"):
    """Lowercased Moses-tokenized BLEU, the metric of the Multi30k literature.

    Published Multi30k scores are `multi-bleu.perl` against the dataset's
    tokenized files, which its `scripts/task1-tokenize.sh` makes with
    `lowercase.perl | normalize-punctuation.perl -l L | tokenizer.perl -l L`
    (no compound splitting). The same three steps run here on the hypotheses
    and on the references, so German quotes („…“) and en dashes in a
    hypothesis match the ASCII ones of those files.

    Args:
        hypotheses: sequence of str, detokenized system outputs.
        references: one reference set (sequence of str) or several, detokenized.
        language: str. Moses language of the hypotheses and references.

    Returns:
        float, BLEU in [0, 100].

    Example:

    >>> round(multi30k_bleu(["Ein Hund rennt."], ["ein Hund rennt ."]), 2)
    100.0
    """
    sets = reference_sets(hypotheses, references)
    normalizer = _normalizer(language)

    def prepare(lines):
        return moses_tokenize([normalizer.normalize(line.lower()) for line in lines], language)

    return multi_bleu(prepare(hypotheses), [prepare(s) for s in sets])
