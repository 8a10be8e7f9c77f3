"""The one home of the decoding settings (paper 6.1) and their defaults.

`Translator`, `export_saved_model`, the CTranslate2 export, validation during training and the
`translate`, `export` and `train` commands all read a `DecodingConfig`; a command's decoding
flags are generated from its fields. Importing this module loads no backend.
"""

import dataclasses

from keras_transformer.decoding.length_penalty_rules import LENGTH_PENALTY_RULES
from keras_transformer.utils.dataclass_config import DataclassConfig, setting
from keras_transformer.utils.numeric_settings import check_decoding_settings, check_int

# The flags of the settings `check_decoding_settings` checks, for its messages.
DECODING_FLAGS = {
    "beam_size": "--beam-size",
    "alpha": "--alpha",
    "max_extra_length": "--max-extra-length",
    "max_source_length": "--max-source-length",
    "num_results": "--n-best",
}


@dataclasses.dataclass(frozen=True)
class DecodingConfig(DataclassConfig):
    """How sentences are decoded: beam search (paper 6.1), its outputs, its batches.

    The defaults are the paper's: beam 4, length penalty alpha 0.6 with the
    GNMT rule, outputs at most 50 tokens longer than the input. Invalid
    values raise `ValueError` naming the field.

    Example:

    >>> DecodingConfig(beam_size=5).alpha
    0.6
    >>> DecodingConfig(alpha=-1)
    ValueError: `alpha` must be >= 0. Received: alpha=-1
    """

    beam_size: int = setting(4, "Beam width (6.1: 4).", metavar="N")
    alpha: float = setting(0.6, "Length penalty exponent (6.1: 0.6).")
    length_penalty_rule: str = setting(
        "gnmt",
        "How finished hypotheses are ranked: gnmt (6.1: log-prob / ((5 + length) / 6) ** "
        "alpha) or average (log-prob / length ** alpha, transformers' length_penalty).",
        choices=LENGTH_PENALTY_RULES,
    )
    max_extra_length: int = setting(
        50, "Output tokens allowed beyond the input's (6.1: 50).", metavar="N"
    )
    num_results: int = setting(
        1,
        "Hypotheses kept per sentence, best first; <= --beam-size.",
        flag="--n-best",
        metavar="K",
    )
    max_source_length: int | None = setting(
        None,
        "Source tokens kept (EOS included); longer sentences are cut and counted. none: the "
        "model's limit (max_position; with learned positions, max_position - "
        "max-extra-length - 1).",
        metavar="N",
    )
    batch_tokens: int | None = setting(
        None,
        "Upper bound on sentences x padded length of one decoding batch; none: the backend's "
        "choice (4096; 256 with JAX on a CPU, whose compiled search keeps every row of a "
        "batch until its last one ends).",
        metavar="N",
    )
    batch_size: int | None = setting(
        None,
        "Upper bound on the sentences of one decoding batch; none: only --batch-tokens.",
        metavar="N",
    )

    def __post_init__(self):
        self.check_types()
        if self.length_penalty_rule not in LENGTH_PENALTY_RULES:
            raise ValueError(
                f"`length_penalty_rule` must be one of {LENGTH_PENALTY_RULES}. "
                f"Received: length_penalty_rule={self.length_penalty_rule!r}"
            )
        check_decoding_settings(
            beam_size=self.beam_size,
            alpha=self.alpha,
            max_extra_length=self.max_extra_length,
            max_source_length=self.max_source_length,
            num_results=self.num_results,
        )
        check_int(self.batch_tokens, "batch_tokens", minimum=1, optional=True)
        check_int(self.batch_size, "batch_size", minimum=1, optional=True)

    @classmethod
    def from_settings(cls, decoding=None, **settings):
        """`decoding` (or the defaults) with `settings` (field values) applied.

        The `decoding=None, **settings` pair of `Translator` and
        `export_saved_model`: either a whole config, single fields, or both.
        """
        unknown = sorted(set(settings) - {field.name for field in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"Not a decoding setting: {', '.join(unknown)}")
        if decoding is None:
            return cls(**settings)
        if not isinstance(decoding, cls):
            raise TypeError(
                f"`decoding` must be a DecodingConfig. Received: {type(decoding).__name__}"
            )
        return decoding.replace(**settings) if settings else decoding

    def batch_token_limit(self):
        """`batch_tokens`, or the backend's choice when it is None.

        Reads the backend (`keras_transformer.backend.decoding_batch_tokens`):
        call it where decoding runs, not where the config is made.
        """
        if self.batch_tokens is not None:
            return self.batch_tokens
        from keras_transformer import backend

        return backend.decoding_batch_tokens()

    def source_length_limit(self, model_config):
        """The source ids a model can decode from: the longest source the positions reach.

        With learned positions (Table 3 row E) decoder positions must stay
        below `max_position` too, so sources keep `max_position -
        max_extra_length - 1`; sinusoidal positions have no hard limit, and
        a served model keeps `max_position` ids.

        Args:
            model_config: the model's `TransformerConfig`.
        """
        if model_config.position_embedding == "learned":
            return model_config.max_position - self.max_extra_length - 1
        return model_config.max_position

    def kept_source_length(self, model_config):
        """`max_source_length`, or the model's limit when it is None; checked against the model.

        Raises:
            ValueError: with learned positions, a `max_source_length` the
                positions cannot reach with `max_extra_length` more outputs.
        """
        limit = self.source_length_limit(model_config)
        if self.max_source_length is None:
            return limit
        if model_config.position_embedding == "learned" and self.max_source_length > limit:
            raise ValueError(
                f"With learned positions (max_position={model_config.max_position}) and "
                f"max_extra_length={self.max_extra_length}, `max_source_length` must be <= "
                f"{limit}. Received: {self.max_source_length}"
            )
        return self.max_source_length
