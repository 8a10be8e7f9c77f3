"""The one home of the decoding settings (paper 6.1) and their defaults.

`Translator`, `export_saved_model`, the CTranslate2 export, validation during training and the
`translate`, `export` and `train` commands all read a `DecodingConfig`; a command's decoding
flags are generated from its fields. Importing this module loads no backend.
"""

import dataclasses

from keras_transformer.decoding.search_strategy import SearchStrategy
from keras_transformer.models.quantize_modes import QUANTIZE_MODES
from keras_transformer.utils.dataclass_config import DataclassConfig, setting

# How a finished hypothesis is ranked: log_prob / penalty(length), length counting the EOS.
# "gnmt" (paper 6.1): ((5 + length) / 6) ** alpha; "average": length ** alpha, the
# `length_penalty` of Hugging Face transformers and fairseq (alpha 1: the mean log-prob).
LENGTH_PENALTY_RULES = ("gnmt", "average")

# The strategies that keep beams: they read beam_size, alpha and the length penalty rule.
BEAM_STRATEGIES = ("beam", "constrained")

# The registry of decoding strategies, `DecodingConfig.search`'s choices: one line each.
SEARCH_STRATEGIES = {
    "beam": SearchStrategy("beam_search", max_results="beam_size"),
    "greedy": SearchStrategy("greedy_search", max_results=1),
    "sampling": SearchStrategy("sampling_search"),
    "constrained": SearchStrategy("constrained_search", max_results="beam_size"),
}


def get_search(name):
    """The `build_search` function of the strategy registered as `name`.

    Example:

    >>> search = get_search("sampling")(model, DecodingConfig(top_k=10), bos_id=2, eos_id=3)
    """
    if name not in SEARCH_STRATEGIES:
        raise ValueError(f"`search` must be one of {tuple(SEARCH_STRATEGIES)}. Received: {name!r}")
    return SEARCH_STRATEGIES[name].builder()


def decoding_setting(default, help, **metadata):
    """A `DecodingConfig` field (`setting`); the metadata keys the package reads are:

    `served`: the SavedModel decodes with it, fixed at export and written to
    its settings file; `strategies`: only those searches read it (a SavedModel
    of another strategy does not record it); `training_run`: False where a
    training run has no such flag; range and choices as `check_settings`
    reads them. Every decoding setting may change when a run resumes: none
    shapes the trained state.
    """
    return setting(default, help, may_change_on_resume=True, **metadata)


@dataclasses.dataclass(frozen=True)
class DecodingConfig(DataclassConfig):
    """How sentences are decoded: the search (paper 6.1: beam), its outputs, its batches.

    The defaults are the paper's: beam 4, length penalty alpha 0.6 with the
    GNMT rule, outputs at most 50 tokens longer than the input. `search`
    picks a registered strategy (`SEARCH_STRATEGIES`): beam, greedy or
    sampling (temperature, top-k, top-p, seed). Invalid values raise
    `ValueError` naming the field; the checks read the fields' metadata.

    Example:

    >>> DecodingConfig(beam_size=5).alpha
    0.6
    >>> DecodingConfig(alpha=-1)
    ValueError: `alpha` must be >= 0. Received: alpha=-1
    >>> DecodingConfig(search="sampling", top_p=0.9, num_results=8)
    """

    search: str = decoding_setting(
        "beam",
        "How each output is chosen: beam (6.1), greedy (the most probable token at each step) "
        "or sampling (a token drawn from the model's distribution at each step, as "
        "--temperature, --top-k and --top-p shape it; --n-best N draws N per sentence); "
        "constrained: beam search in which given target phrases must appear (translate "
        "--constraints picks it; without phrases it is beam search).",
        choices=tuple(SEARCH_STRATEGIES),
        served=True,
        training_run=False,
    )
    beam_size: int = decoding_setting(
        4, "Beam width (6.1: 4).", metavar="N", minimum=1, served=True, strategies=BEAM_STRATEGIES
    )
    alpha: float = decoding_setting(
        0.6,
        "Length penalty exponent (6.1: 0.6).",
        minimum=0,
        served=True,
        strategies=BEAM_STRATEGIES,
    )
    length_penalty_rule: str = decoding_setting(
        "gnmt",
        "How finished hypotheses are ranked: gnmt (6.1: log-prob / ((5 + length) / 6) ** "
        "alpha) or average (log-prob / length ** alpha, transformers' length_penalty).",
        choices=LENGTH_PENALTY_RULES,
        served=True,
        strategies=BEAM_STRATEGIES,
    )
    max_extra_length: int = decoding_setting(
        50,
        "Output tokens allowed beyond the input's (6.1: 50).",
        metavar="N",
        minimum=0,
        served=True,
    )
    num_results: int = decoding_setting(
        1,
        "Hypotheses kept per sentence, best first: <= --beam-size with beam search, 1 with "
        "greedy, the samples drawn with sampling.",
        flag="--n-best",
        metavar="K",
        minimum=1,
    )
    max_source_length: int | None = decoding_setting(
        None,
        "Source tokens kept (EOS included); longer sentences are cut and counted. none: the "
        "model's limit (max_position; with learned positions, max_position - "
        "max-extra-length - 1).",
        metavar="N",
        minimum=1,
        served=True,
    )
    batch_tokens: int | None = decoding_setting(
        None,
        "Upper bound on sentences x padded length of one decoding batch; none: the backend's "
        "choice (4096; 256 with JAX on a CPU, whose compiled search keeps every row of a "
        "batch until its last one ends).",
        metavar="N",
        minimum=1,
        served=True,
    )
    batch_size: int | None = decoding_setting(
        None,
        "Upper bound on the sentences of one decoding batch; none: only --batch-tokens.",
        metavar="N",
        minimum=1,
    )
    temperature: float = decoding_setting(
        1.0,
        "Sampling: the log-probabilities are divided by it (< 1 sharper, > 1 flatter).",
        metavar="T",
        above=0,
        served=True,
        strategies=("sampling",),
        training_run=False,
    )
    top_k: int = decoding_setting(
        0,
        "Sampling: draw only among the K most probable tokens; 0: all.",
        metavar="K",
        minimum=0,
        served=True,
        strategies=("sampling",),
        training_run=False,
    )
    top_p: float = decoding_setting(
        1.0,
        "Sampling (nucleus): draw only among the fewest most probable tokens whose "
        "probabilities sum to at least P (after --temperature and --top-k); 1: all.",
        metavar="P",
        above=0,
        maximum=1,
        served=True,
        strategies=("sampling",),
        training_run=False,
    )
    sampling_seed: int = decoding_setting(
        0,
        "Sampling: the seed; with the same seed a sentence gets the same samples, whatever "
        "the batch or the backend.",
        flag="--seed",
        metavar="N",
        minimum=0,
        maximum=2**32 - 1,
        served=True,
        strategies=("sampling",),
        training_run=False,
    )
    quantize: str | None = decoding_setting(
        None,
        "Decode with int8 weights: each weight matrix quantized per output channel in memory "
        "(Keras' model.quantize('int8'): int8 kernels, int8 matmuls of inputs quantized per "
        "row), about a quarter of the float32 weights; none: the weights as they are (a model "
        "file exported with --quantize int8 is int8 already). CTranslate2 exports take "
        "--quantization instead.",
        choices=QUANTIZE_MODES,
        served=True,
        training_run=False,
    )

    def __post_init__(self):
        self.check_types()
        self.check_settings()
        limit, name = SEARCH_STRATEGIES[self.search].results_limit(self)
        if limit is not None and self.num_results > limit:
            bound = f"`{name}` ({limit})" if name else f"{limit} with search={self.search!r}"
            raise ValueError(
                f"`num_results` must be <= {bound}. Received: num_results={self.num_results}"
            )

    def served_settings(self):
        """`{field: value}` of the settings a SavedModel of this config decodes with.

        The fields marked `served`, less those of another strategy.
        """
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.metadata.get("served")
            and self.search in field.metadata.get("strategies", (self.search,))
        }

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
