"""Which model a training run trains: a preset with overrides, or a model file's."""

import dataclasses

from keras_transformer.experiment.settings.config_checks import check_choices
from keras_transformer.models.presets import PRESETS, get_preset
from keras_transformer.models.transformer_config import TransformerConfig
from keras_transformer.utils.dataclass_config import DataclassConfig, setting

PRECISIONS = ("mixed_bfloat16", "mixed_float16")
# TransformerConfig fields a run takes from its vocabulary, not from `model_overrides`.
VOCABULARY_FIELDS = ("vocabulary_size", "source_vocabulary_size", "pad_id")
# TransformerConfig fields a run started from a model file (`init_from`) may change: they
# shape training only, not the weights.
INIT_FROM_OVERRIDES = ("dropout", "attention_dropout", "activation_dropout")
MODEL_OVERRIDES = tuple(
    field.name
    for field in dataclasses.fields(TransformerConfig)
    if field.name not in VOCABULARY_FIELDS
)


@dataclasses.dataclass(frozen=True)
class ModelSettings(DataclassConfig):
    """The model of a run: a preset (Table 3's rows) changed by `model_overrides`, or the
    architecture and weights of a model file (`init_from`); its numeric precision.

    Example:

    >>> ModelSettings(preset="big").model_config(32000).d_model
    1024
    """

    preset: str = setting(
        "base",
        "Model preset: base, big, table3-A1 ... table3-E.",
        choices=tuple(PRESETS),
        metavar="NAME",
    )
    model_overrides: dict = dataclasses.field(
        default_factory=dict,
        metadata=dict(
            help="Change one TransformerConfig field of the preset, e.g. num_layers=2 (repeatable; "
            "values are parsed as the field's type: 2, 0.3, true, learned, none).",
            flag="--model-override",
            metavar="FIELD=VALUE",
            override_of=TransformerConfig,
            override_fields=MODEL_OVERRIDES,
        ),
    )
    init_from: str | None = setting(
        None,
        "Start from this translation model file (a run's model.keras, or keras-transformer "
        "import's output): its architecture, weights and tokenizer; the run trains them on "
        "its own data with a new optimizer and its own schedule. The recipe's model settings "
        "do not apply; --model-override may change only dropout, attention_dropout and "
        "activation_dropout; --preset still gives the label smoothing, steps and averaging.",
        metavar="MODEL",
    )
    precision: str | None = setting(
        None,
        "Mixed precision policy (logits, loss and softmax stay float32); none is float32.",
        choices=PRECISIONS,
    )

    def __post_init__(self):
        self.check_types()
        check_choices(self, precision=(None, *PRECISIONS))
        get_preset(self.preset)
        unknown = sorted(set(self.model_overrides) - set(MODEL_OVERRIDES))
        if unknown:
            raise ValueError(
                f"`model_overrides` may set {', '.join(MODEL_OVERRIDES)} (the run sets the "
                f"other fields itself). Received: {unknown}"
            )
        fixed = sorted(set(self.model_overrides) - set(INIT_FROM_OVERRIDES))
        if self.init_from is not None and fixed:
            raise ValueError(
                f"`model_overrides` may set only {', '.join(INIT_FROM_OVERRIDES)} with "
                f"`init_from` (the architecture is the model file's). Received: {fixed}"
            )

    def model_config(self, vocabulary_size):
        """The preset's `TransformerConfig` with `model_overrides` applied.

        Args:
            vocabulary_size: int, the run's vocabulary size.
        """
        try:
            return get_preset(self.preset).config(vocabulary_size, **self.model_overrides)
        except ValueError as error:
            raise ValueError(
                f"model settings (preset {self.preset!r} with --model-override "
                f"{self.model_overrides}): {error}"
            ) from None
