"""Strings in, translations out: tokenize, batch by length, search, detokenize."""

import math

import keras
import numpy as np

from keras_transformer import backend
from keras_transformer.decoding.decoding_config import DecodingConfig, get_search
from keras_transformer.decoding.ensemble import Ensemble
from keras_transformer.decoding.target_inputs import (
    check_target_inputs,
    padded_phrases,
    padded_prefixes,
    tokenized_phrases,
    tokenized_targets,
)
from keras_transformer.models.quantization import quantized_copy
from keras_transformer.utils.count_progress import CountProgress
from keras_transformer.utils.map_in_order import map_in_order


def to_token_lists(token_ids):
    """Tokenizer output (ragged tensor, dense tensor or lists) -> list of lists of int."""
    if hasattr(token_ids, "to_list"):
        return token_ids.to_list()
    if hasattr(token_ids, "numpy"):
        token_ids = token_ids.numpy()
    return [list(map(int, row)) for row in token_ids]


def _to_strings(texts):
    """Detokenizer output (string tensor, bytes or str) -> list of str."""
    if hasattr(texts, "numpy"):
        texts = texts.numpy()
    texts = np.asarray(texts, dtype=object).reshape(-1)
    return [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in texts]


class Translator:
    """Translates lists of sentences with a trained model (paper 6.1 decoding).

    Sentences are tokenized, an EOS appended as in training, sorted by
    length and grouped into batches of similar length: each batch is padded
    to a bucket length (powers of two from 8) and to a power-of-two batch
    size, so the compiled beam search is traced once per (bucket, batch size)
    pair rather than once per batch. Outputs come back in input order.

    Empty and whitespace-only sentences translate to `""` without decoding.

    Args:
        model: a trained `Seq2SeqTransformer`, or a list of them sharing
            `tokenizer`: an `Ensemble`, which averages their next-token
            probabilities at each step.
        tokenizer: the model's tokenizer, a `SubwordTokenizer` or
            `JointVocabularyTokenizer` (provides `bos_id`, `eos_id`,
            tokenizing and `detokenize`; see `TranslationTokenizer`).
        decoding: a `DecodingConfig` (the search strategy and its
            settings, extra output length, results kept, source length
            limit, batching); None for the paper's settings (6.1: beam 4,
            alpha 0.6, 50 extra tokens). Here `max_source_length=None`
            keeps every source whole. Its `search` picks the registered
            strategy: "beam" (paper 6.1), "greedy" (e.g. for a cheaper
            validation BLEU while training) or "sampling" (`num_results`
            samples per sentence, most probable first).
        add_source_eos: bool or None. Append EOS to sources, as the input
            pipeline does in training; None (default): as the model was
            trained, `model.config.source_eos`.
        drop_settled: bool or None. Beam search only: whether sources that
            have settled leave the decoding loop (see `build_beam_search`);
            `None` where the backend allows it.
        **settings: single `DecodingConfig` fields (e.g. `beam_size=5`),
            applied over `decoding`, e.g. `search="greedy"`.

    With `quantize="int8"` the translator decodes a copy of the model whose
    weight matrices are int8 (`quantized_copy`); the model given stays float.

    Example:

    >>> translator = Translator(model, tokenizer)
    >>> translator.translate(["A dog runs.", "Two men talk."])
    ['Ein Hund rennt.', 'Zwei Männer unterhalten sich.']
    >>> Translator(model, tokenizer, DecodingConfig(beam_size=5, alpha=1.0))
    >>> Translator(model, tokenizer, search="sampling", top_p=0.9, num_results=4)
    >>> Translator([model, other_checkpoint], tokenizer)  # an ensemble
    """

    def __init__(
        self,
        model,
        tokenizer,
        decoding=None,
        *,
        add_source_eos=None,
        drop_settled=None,
        **settings,
    ):
        decoding = DecodingConfig.from_settings(decoding, **settings)
        if isinstance(model, list | tuple):
            model = model[0] if len(model) == 1 else Ensemble(model)
        if decoding.quantize is not None:  # on copies: the caller's models stay float
            copies = [
                quantized_copy(m, decoding.quantize) for m in getattr(model, "models", [model])
            ]
            model = copies[0] if len(copies) == 1 else Ensemble(copies)
        self.model = model
        self.tokenizer = tokenizer
        self.decoding = decoding
        if add_source_eos is None:
            add_source_eos = model.config.source_eos  # as the model was trained
        self.add_source_eos = add_source_eos
        self.pad_id = model.config.pad_id
        self.eos_id = tokenizer.eos_id
        self.truncated = 0
        self.phrases_found = 0  # constraint phrases found in the best translations
        self.phrases_given = 0
        self.batch_tokens = decoding.batch_token_limit()
        self._options = {} if drop_settled is None else {"drop_settled": drop_settled}
        self._search = self._built_search(decoding)
        self._constrained_search = self._search if decoding.search == "constrained" else None

    def _built_search(self, decoding):
        return get_search(decoding.search)(
            self.model,
            decoding,
            bos_id=self.tokenizer.bos_id,
            eos_id=self.tokenizer.eos_id,
            **self._options,
        )

    def _search_for(self, constraints):
        """The search: the configured one, or constrained beam search for `constraints`."""
        if constraints is None:
            return self._search
        if self._constrained_search is None:
            if self.decoding.search != "beam":
                raise ValueError(
                    "Constraints need beam search (search='beam' or 'constrained'). "
                    f"Received: search={self.decoding.search!r}"
                )
            decoding = self.decoding.replace(search="constrained")
            self._constrained_search = self._built_search(decoding)
        return self._constrained_search

    def _tokenize(self, sentences):
        token_lists = to_token_lists(self.tokenizer(sentences)) if sentences else []
        if self.add_source_eos:
            token_lists = [tokens + [self.eos_id] for tokens in token_lists]
        limit = self.decoding.max_source_length
        if limit is not None:
            self.truncated += sum(len(t) > limit for t in token_lists)
            token_lists = [t[:limit] for t in token_lists]
        return token_lists

    def _batches(self, token_lists):
        """Yields (indices, padded ids) in order of increasing length."""
        order = sorted(range(len(token_lists)), key=lambda i: len(token_lists[i]))
        start = 0
        while start < len(order):
            length = max(8, 2 ** math.ceil(math.log2(len(token_lists[order[start]]))))
            rows = [i for i in order[start:] if len(token_lists[i]) <= length]
            capacity = max(1, self.batch_tokens // length)
            if self.decoding.batch_size is not None:
                capacity = min(capacity, self.decoding.batch_size)
            rows = rows[:capacity]
            batch_size = 2 ** math.ceil(math.log2(len(rows)))  # bounded set of shapes
            ids = np.full((batch_size, length), self.pad_id, "int32")
            for row, index in enumerate(rows):
                ids[row, : len(token_lists[index])] = token_lists[index]
            yield rows, ids
            start += len(rows)

    def _decode(self, batches, prefixes=None, phrases=None):
        """Yields (rows, (tokens, scores) as NumPy arrays) for `batches`, in their order.

        `prefixes` and `phrases` (lists of ids, a list per decoded sentence)
        go with each batch's rows. `backend.decoding_workers()` batches decode
        at the same time (a compiled search may be called from several
        threads: `keras_transformer.backend.compile_search`).
        """
        search = self._search_for(phrases)

        def decode(batch):
            rows, ids = batch
            inputs = [ids]
            if prefixes is not None or phrases is not None:
                chosen = [prefixes[i] for i in rows] if prefixes is not None else []
                inputs.append(padded_prefixes(chosen, len(ids)))
            if phrases is not None:
                inputs.append(padded_phrases([phrases[i] for i in rows], len(ids)))
            return rows, tuple(keras.ops.convert_to_numpy(x) for x in search(*inputs))

        return map_in_order(decode, batches, backend.decoding_workers())

    def translate(
        self, sentences, return_scores=False, verbose="auto", target_prefix=None, constraints=None
    ):
        """Translates `sentences`.

        Args:
            sentences: list of str.
            return_scores: bool. Also return each translation's
                length-penalized log-probability.
            verbose: `"auto"` (progress on stderr from 100 sentences on), 0 or 1.
            target_prefix: None, or a str per sentence: each translation
                starts with its tokens (forced during the first steps; `""`
                forces nothing), with any search.
            constraints: None, or a list of target phrases per sentence
                (`[]`: none): each phrase must appear in the translation
                (lexically constrained beam search, `constrained_search`;
                with beam search only). `phrases_found` and `phrases_given`
                count them (the phrases found in the best translations).

        Returns:
            A list of str in input order, or `(translations, scores)`.

        Example:

        >>> translator.translate(["A dog runs."], target_prefix=["Der Hund"])
        ['Der Hund rennt.']
        >>> translator.translate(["A dog runs."], constraints=[["läuft"]])
        ['Ein Hund läuft.']
        """
        n_best = self.translate_n_best(
            sentences, verbose=verbose, target_prefix=target_prefix, constraints=constraints
        )
        translations = [hypotheses[0][0] for hypotheses in n_best]
        if return_scores:
            return translations, [hypotheses[0][1] for hypotheses in n_best]
        return translations

    def _target_ids(self, to_decode, target_prefix, constraints):
        """`(prefixes, phrases)` of the sentences `to_decode`, as ids (None where not given)."""
        prefixes = phrases = None
        if target_prefix is not None:
            chosen = [target_prefix[i] for i in to_decode]
            prefixes = tokenized_targets(self.tokenizer, chosen, to_token_lists)
        if constraints is not None:
            chosen = [list(constraints[i]) for i in to_decode]
            phrases = tokenized_phrases(self.tokenizer, chosen, to_token_lists)
        return prefixes, phrases

    def translate_n_best(self, sentences, verbose="auto", target_prefix=None, constraints=None):
        """Translates `sentences`, keeping the `num_results` best hypotheses of each.

        Args:
            sentences: list of str.
            verbose: `"auto"` (progress on stderr from 100 sentences on), 0 or 1.
            target_prefix, constraints: as `translate` reads them.

        Returns:
            A list (input order) of lists of `num_results` `(translation,
            score)` pairs, best first; scores are length-penalized
            log-probabilities. A blank sentence gives `("", 0.0)` first; a
            slot with no hypothesis (fewer distinct ones exist) is
            `("", -inf)`.

        Example:

        >>> Translator(model, tokenizer, num_results=2).translate_n_best(["A dog runs."])
        [[('Ein Hund rennt.', -0.41), ('Ein Hund läuft.', -0.73)]]
        """
        if isinstance(sentences, str):
            raise TypeError("`translate` takes a list of str. Received a single str.")
        sentences = list(sentences)
        check_target_inputs(len(sentences), target_prefix, constraints)
        empty = [("", -math.inf)] * (self.decoding.num_results - 1)
        n_best = [[("", 0.0), *empty] for _ in sentences]
        to_decode = [i for i, s in enumerate(sentences) if s.strip()]
        token_lists = self._tokenize([sentences[i] for i in to_decode])
        if verbose == "auto":
            verbose = int(len(to_decode) >= 100)
        progress = CountProgress(len(to_decode), "sentences") if verbose else None
        prefixes, phrases = self._target_ids(to_decode, target_prefix, constraints)
        batches = self._decode(self._batches(token_lists), prefixes, phrases)
        for rows, (tokens, batch_scores) in batches:
            # (rows, num_results, output_length) and (rows, num_results)
            tokens, batch_scores = tokens[: len(rows)], batch_scores[: len(rows)]
            outputs = [
                [int(t) for t in hypothesis if t != self.pad_id]
                for row in tokens
                for hypothesis in row
            ]
            texts = _to_strings(self.tokenizer.detokenize(outputs)) if outputs else []
            for row, index in enumerate(rows):
                first = row * self.decoding.num_results
                n_best[to_decode[index]] = [
                    (texts[first + rank], float(batch_scores[row, rank]))
                    for rank in range(self.decoding.num_results)
                ]
            if progress is not None:
                progress.add(len(rows))
        if progress is not None:
            progress.close()
        for phrases, hypotheses in zip(constraints or [], n_best, strict=False):
            self.phrases_given += len(phrases)
            self.phrases_found += sum(phrase in hypotheses[0][0] for phrase in phrases)
        return n_best
