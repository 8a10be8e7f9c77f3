"""What a translation's target side may be given: a forced prefix and constraint phrases.

Checks, tokenizing and the padded arrays the searches read. Importing this
module loads no backend (the `translate` command checks its files with it).
"""

import math

import numpy as np

# The most phrases per sentence and tokens per phrase (constrained search's tensors).
MAX_PHRASES = 16
MAX_PHRASE_TOKENS = 16


def parse_constraint_line(line):
    """The phrases of one `--constraints` line: tab-separated; an empty line has none.

    Raises:
        ValueError: an empty or blank phrase (two tabs in a row, a tab at an
            end), or more than `MAX_PHRASES` phrases.
    """
    line = line.rstrip("\r\n")
    if not line.strip() and "\t" not in line:
        return []
    phrases = line.split("\t")
    if any(not phrase.strip() for phrase in phrases):
        raise ValueError("has an empty phrase (phrases are separated by one tab)")
    if len(phrases) > MAX_PHRASES:
        raise ValueError(f"has {len(phrases)} phrases; at most {MAX_PHRASES} are allowed")
    return [phrase.strip() for phrase in phrases]


def check_target_inputs(count, target_prefix=None, constraints=None):
    """Raises `ValueError` unless there is one prefix and one list of phrases per sentence."""
    for name, values in (("target_prefix", target_prefix), ("constraints", constraints)):
        if values is not None and len(values) != count:
            raise ValueError(f"`{name}` has {len(values)} entries for {count} sentences")
    for number, phrases in enumerate(constraints or [], start=1):
        if isinstance(phrases, str):
            raise TypeError(f"`constraints` entry {number} must be a list of str, not a str")
        if len(phrases) > MAX_PHRASES:
            raise ValueError(
                f"`constraints` entry {number} has {len(phrases)} phrases; at most "
                f"{MAX_PHRASES} are allowed"
            )
        if any(not phrase.strip() for phrase in phrases):
            raise ValueError(f"`constraints` entry {number} has an empty phrase")


def tokenized_targets(tokenizer, texts, to_token_lists):
    """Target-side ids of `texts` (no EOS); a blank text gives `[]`."""
    tokenize = getattr(tokenizer, "tokenize_target", tokenizer)
    kept = [i for i, text in enumerate(texts) if text.strip()]
    ids = to_token_lists(tokenize([texts[i] for i in kept])) if kept else []
    token_lists = [[] for _ in texts]
    for index, tokens in zip(kept, ids, strict=True):
        token_lists[index] = [int(t) for t in tokens]
    return token_lists


def tokenized_phrases(tokenizer, constraints, to_token_lists):
    """Each sentence's phrases as id lists; ValueError for one with no or too many ids."""
    flat = [phrase for phrases in constraints for phrase in phrases]
    ids = iter(tokenized_targets(tokenizer, flat, to_token_lists))
    result = []
    for number, phrases in enumerate(constraints, start=1):
        lists = [next(ids) for _ in phrases]
        for phrase, tokens in zip(phrases, lists, strict=True):
            if not tokens or len(tokens) > MAX_PHRASE_TOKENS:
                raise ValueError(
                    f"constraint {phrase!r} of sentence {number} has {len(tokens)} tokens; "
                    f"1 to {MAX_PHRASE_TOKENS} are allowed"
                )
        result.append(lists)
    return result


def _bucket(length):
    return 2 ** math.ceil(math.log2(max(length, 1)))


def padded_prefixes(token_lists, batch_size):
    """int32 (batch_size, power of two), each row's ids then -1 (rows past the lists: -1)."""
    width = _bucket(max((len(t) for t in token_lists), default=1))
    array = np.full((batch_size, width), -1, "int32")
    for row, tokens in enumerate(token_lists):
        array[row, : len(tokens)] = tokens
    return array


def padded_phrases(phrase_lists, batch_size):
    """int32 (batch_size, phrases, tokens), powers of two, -1 padded."""
    count = _bucket(max((len(p) for p in phrase_lists), default=1))
    length = _bucket(max((len(t) for p in phrase_lists for t in p), default=1))
    array = np.full((batch_size, count, length), -1, "int32")
    for row, phrases in enumerate(phrase_lists):
        for slot, tokens in enumerate(phrases):
            array[row, slot, : len(tokens)] = tokens
    return array
