"""`Ensemble`: several models decoded as one, averaging their next-token probabilities."""

import contextlib
import math

from keras import ops

from keras_transformer.layers.decoding_cache import DecodingCache


class Ensemble:
    """Models of one vocabulary decoded together, as every search decodes one model.

    At each step every model reads its own key/value cache and gives its
    next-token distribution; the ensemble's log-probabilities are the log of
    their mean, `log(sum_i p_i / n)` (fairseq's rule), computed as a
    log-sum-exp of the models' log-softmax. It has the interface the
    searches use (`encode`, `initialize_cache`, `decode`,
    `fixed_decoder_weights`, `config`, `variables`), so beam, greedy and
    sampling search decode it unchanged; its `DecodingCache` holds the
    models' caches side by side (`growing` and `fixed` are tuples with one
    entry per model), so reordering beams or dropping sources moves all of
    them. Decoding without the cache (`use_cache=False`) is not supported.

    Args:
        models: a list of two or more `Seq2SeqTransformer`s with the same
            vocabulary sizes and padding id (their other sizes may differ).

    Example:

    >>> Translator(Ensemble([model_a, model_b]), tokenizer)  # or Translator([a, b], tokenizer)
    """

    def __init__(self, models):
        models = list(models)
        if len(models) < 2:
            raise ValueError(f"An ensemble needs two models or more. Received: {len(models)}")
        first = models[0].config
        for index, model in enumerate(models[1:], start=1):
            for name in ("vocabulary_size", "source_vocabulary_size", "pad_id", "source_eos"):
                if getattr(model.config, name) != getattr(first, name):
                    raise ValueError(
                        f"The ensemble's models differ in {name}: model 0 has "
                        f"{getattr(first, name)}, model {index} {getattr(model.config, name)}."
                    )
        self.models = models
        self.config = first

    @property
    def built(self):
        return all(model.built for model in self.models)

    def build(self):
        for model in self.models:
            if not model.built:
                model.build()

    @property
    def variables(self):
        return [variable for model in self.models for variable in model.variables]

    def encode(self, encoder_token_ids):
        """Each model's encoder output: a tuple."""
        return tuple(model.encode(encoder_token_ids) for model in self.models)

    def initialize_cache(self, encoder_outputs, encoder_token_ids, max_length, rows_per_source=1):
        """The models' `DecodingCache`s as one: `growing` and `fixed` tuples, a model each."""
        caches = [
            model.initialize_cache(outputs, encoder_token_ids, max_length, rows_per_source)
            for model, outputs in zip(self.models, encoder_outputs, strict=True)
        ]
        return _joined(caches)

    def decode(self, decoder_token_ids, cache, index):
        """`(log_probs, cache)`: the log of the models' mean next-token probabilities.

        The log-probabilities stand for logits: their log-softmax is themselves.
        """
        log_probs, caches = [], []
        for number, model in enumerate(self.models):
            own = DecodingCache(cache.growing[number], cache.fixed[number])
            logits, own = model.decode(decoder_token_ids, own, index)
            log_probs.append(ops.log_softmax(ops.cast(logits, "float32"), axis=-1))
            caches.append(own)
        mean = ops.logsumexp(ops.stack(log_probs), axis=0) - math.log(len(self.models))
        return mean, _joined(caches)

    @contextlib.contextmanager
    def fixed_decoder_weights(self):
        """Every model's `fixed_decoder_weights`, entered together."""
        with contextlib.ExitStack() as stack:
            for model in self.models:
                stack.enter_context(model.fixed_decoder_weights())
            yield

    def decode_sequence(self, *args, **kwargs):
        raise NotImplementedError("An ensemble decodes with the key/value cache only.")


def _joined(caches):
    return DecodingCache(
        tuple(cache.growing for cache in caches), tuple(cache.fixed for cache in caches)
    )
