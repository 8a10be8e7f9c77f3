"""Everything one training run needs: one config per concern, and the run's own settings."""

import dataclasses
import difflib

from keras_transformer.data.pipeline_config import PipelineConfig
from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.experiment.settings.adaptation_config import AdaptationConfig
from keras_transformer.experiment.settings.checkpoint_config import CheckpointConfig
from keras_transformer.experiment.settings.config_checks import check_at_least, check_choices
from keras_transformer.experiment.settings.data_config import DataConfig
from keras_transformer.experiment.settings.extra_data_config import ExtraDataConfig
from keras_transformer.experiment.settings.model_settings import ModelSettings
from keras_transformer.experiment.settings.optimization_config import OptimizationConfig
from keras_transformer.experiment.settings.validation_config import ValidationConfig
from keras_transformer.models.presets import get_preset
from keras_transformer.utils.dataclass_config import DataclassConfig, setting

DISTRIBUTIONS = ("none", "mirrored", "multi_worker", "data_parallel")


@dataclasses.dataclass(frozen=True)
class ExperimentConfig(DataclassConfig):
    """Settings of `run_experiment`; defaults are the paper's base model on WMT14 en-de.

    The settings of each concern live in a config of their own: `data`
    (`DataConfig`), `model` (`ModelSettings`), `optimization`
    (`OptimizationConfig`), `checkpoint` (`CheckpointConfig`), `validation`
    (`ValidationConfig`) and `decoding` (`DecodingConfig`, for the
    validation and test translations and the export); the run's own
    settings (where it writes, devices, logging, seed) are fields here. A
    config field's `title` names its group of flags in `--help`.
    Each config checks its own fields; this class checks the settings that
    involve several of them. Every field of every config is a flag of the
    recipes and `keras-transformer train` (`--field-name`, or the field's
    `flag`), with the field's help text; invalid values raise ValueError
    naming the field.

    Example:

    >>> config = ExperimentConfig(
    ...     output_dir="runs/base",
    ...     data=DataConfig(data_dir="data/wmt14", test_split="newstest2014"),
    ...     optimization=OptimizationConfig(accumulation_steps=8),
    ... )
    >>> config.replace(decoding={"beam_size": 5}).decoding.beam_size
    5
    """

    output_dir: str = setting(
        "runs/experiment",
        "Everything is written here (in a multi-process run, process 0's; the others write "
        "in worker-i / process-i in it); a rerun resumes from it, and a second run on a "
        "directory in use is refused.",
    )
    data: DataConfig = dataclasses.field(
        default_factory=DataConfig, metadata={"title": "data and vocabulary"}
    )
    extra_data: ExtraDataConfig = dataclasses.field(
        default_factory=ExtraDataConfig,
        metadata={"title": "extra training pairs (back-translation)"},
    )
    model: ModelSettings = dataclasses.field(
        default_factory=ModelSettings, metadata={"title": "model"}
    )
    adaptation: AdaptationConfig = dataclasses.field(
        default_factory=AdaptationConfig,
        metadata={"title": "adapting an --init-from model (LoRA, frozen parts)"},
    )
    optimization: OptimizationConfig = dataclasses.field(
        default_factory=OptimizationConfig, metadata={"title": "optimization"}
    )
    checkpoint: CheckpointConfig = dataclasses.field(
        default_factory=CheckpointConfig, metadata={"title": "checkpoints and final model"}
    )
    validation: ValidationConfig = dataclasses.field(
        default_factory=ValidationConfig, metadata={"title": "validation and scores"}
    )
    # One translation per sentence: the run's outputs have no n-best lists (no --n-best); its
    # test translations and export use beam search (no --search, no sampling flags).
    decoding: DecodingConfig = dataclasses.field(
        default_factory=DecodingConfig,
        metadata={
            "title": "decoding",
            "skip": ("num_results", *DecodingConfig.fields_with("training_run", False)),
        },
    )
    export: bool = setting(True, "Write a TF Serving SavedModel of the final model at the end.")
    distribution: str = setting(
        "none",
        "mirrored: all local GPUs (TensorFlow); multi_worker: one process per machine with "
        "TF_CONFIG (TensorFlow); data_parallel: all devices (JAX), and with "
        "KERAS_DISTRIBUTION_JOB_ADDRESSES/_NUM_PROCESSES/_PROCESS_ID one process per machine "
        "(see docs/architecture.md); on torch, none only (Keras 3 has no multi-device fit "
        "there).",
        choices=DISTRIBUTIONS,
    )
    log_every_steps: int = setting(
        100, "Updates between lines of the training log and TensorBoard points."
    )
    verbose: int = setting(
        1,
        "0 silent; 1: a progress line on stderr every --log-every-steps updates (step of "
        "max steps, loss, learning rate, tokens/s, elapsed, ETA; rewritten in place on a "
        "terminal) and a line per validation; 2: also the backends' own log lines "
        "(TensorFlow, XLA, CUDA, absl), hidden unless TF_CPP_MIN_LOG_LEVEL is set.",
        choices=(0, 1, 2),
    )
    seed: int = setting(0, "Seed of the data order, weights and dropout.")

    def __post_init__(self):
        self.check_types()
        check_choices(self, distribution=DISTRIBUTIONS, verbose=(0, 1, 2))
        check_at_least(self, 1, "log_every_steps")
        check_at_least(self, 0, "seed")
        kept, averaged = self.checkpoints_kept(), self.checkpoints_averaged()
        if self.checkpoint.final_model == "average" and kept < averaged:
            raise ValueError(
                f"`keep_checkpoints` must be >= the checkpoints averaged at the end "
                f"({averaged}). Received: keep_checkpoints={kept}"
            )
        if self.decoding.num_results != 1:
            raise ValueError(
                "A run keeps one translation per sentence: `num_results` must be 1. "
                f"Received: num_results={self.decoding.num_results}"
            )
        if self.model.init_from is not None and self.data.vocabulary_file is not None:
            raise ValueError(
                "`init_from` and `vocabulary_file` both choose the tokenizer: --init-from "
                "uses the model file's own. Received both."
            )
        if self.adaptation.active and self.model.init_from is None:
            raise ValueError("`lora_rank` and `freeze` adapt an existing model: give `init_from`.")
        self.model_config()
        self.pipeline_config()

    @classmethod
    def from_dict(cls, settings):
        """An `ExperimentConfig` from its `to_dict()` form, or from the flat form of earlier
        versions' `config.json` (every field at the top level), or a mix of them.

        Raises:
            ValueError: a key that names no field ("did you mean ...?"), or an
                invalid value.
        """
        if not isinstance(settings, dict):
            raise ValueError(
                f"{cls.__name__} settings must be a dict. Received: {type(settings).__name__}"
            )
        top, nested = {}, {name: {} for name in SECTIONS}
        for name, value in settings.items():
            if name in SECTIONS:
                if not isinstance(value, dict):
                    raise ValueError(
                        f"`{name}` must be a dict of {SECTIONS[name].__name__} fields. "
                        f"Received: {type(value).__name__}"
                    )
                nested[name].update(value)
            elif name in SECTION_OF:  # a field of a section, as earlier versions wrote it
                nested[SECTION_OF[name]][name] = value
            elif name in RUN_FIELDS:
                top[name] = value
            else:
                known = [*RUN_FIELDS, *SECTIONS, *SECTION_OF]
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(known)}"
                raise ValueError(f"{cls.__name__} has no field {name!r} ({hint})")
        sections = {name: SECTIONS[name].from_dict(values) for name, values in nested.items()}
        return cls(**sections, **top)

    def replace(self, **changes):
        """A copy with `changes` applied (validated again).

        A config's changes may be a dict of its fields: `replace(data={"vocabulary_size":
        8000})` changes that field only.
        """
        for name, value in changes.items():
            if name in SECTIONS and isinstance(value, dict):
                changes[name] = getattr(self, name).replace(**value)
        return dataclasses.replace(self, **changes)

    def steps_to_train(self):
        """The optimizer updates of the run: `train_steps` (--max-steps), or the preset's."""
        steps = self.optimization.train_steps
        return get_preset(self.model.preset).train_steps if steps is None else steps

    def label_smoothing(self):
        """`label_smoothing`, or the preset's (5.4: 0.1; Table 3 row D varies it)."""
        smoothing = self.optimization.label_smoothing
        return get_preset(self.model.preset).label_smoothing if smoothing is None else smoothing

    def checkpoints_averaged(self):
        """`average_last`, or the preset's number of averaged checkpoints (6.1)."""
        return self.checkpoint.averaged(get_preset(self.model.preset).averaged_checkpoints)

    def checkpoints_kept(self):
        """`keep_checkpoints`, or as many as are averaged and at least 5."""
        return self.checkpoint.kept(get_preset(self.model.preset).averaged_checkpoints)

    def model_config(self, vocabulary_size=None):
        """The run's `TransformerConfig`: the preset with `model_overrides` applied.

        Args:
            vocabulary_size: int, the trained vocabulary's; None uses `vocabulary_size`.
        """
        return self.model.model_config(vocabulary_size or self.data.vocabulary_size)

    def pipeline_config(self, **settings):
        """The training batches' `PipelineConfig` (`settings` set the run's own fields)."""
        data = self.data
        try:
            return PipelineConfig(
                token_budget=data.token_budget,
                accumulation_steps=self.optimization.accumulation_steps,
                seed=self.seed,
                **{**data.pipeline_overrides, **settings},
            )
        except ValueError as error:
            raise ValueError(
                f"batching settings (--token-budget {data.token_budget} with "
                f"--pipeline-override {data.pipeline_overrides}): {error}"
            ) from None


# `{field name: config class}` of the configs `ExperimentConfig` holds.
SECTIONS = {
    field.name: field.default_factory
    for field in dataclasses.fields(ExperimentConfig)
    if "title" in field.metadata
}
# The run's own fields (not a config of a concern).
RUN_FIELDS = tuple(
    field.name for field in dataclasses.fields(ExperimentConfig) if field.name not in SECTIONS
)
# `{field name: section}` of every field of the configs: field names are unique across them,
# which the flags (one per field) and the flat `config.json` of earlier versions rely on.
SECTION_OF = {
    field.name: name for name, cls in SECTIONS.items() for field in dataclasses.fields(cls)
}
_NAMES = [
    *RUN_FIELDS,
    *(field.name for cls in SECTIONS.values() for field in dataclasses.fields(cls)),
]
if len(_NAMES) != len(set(_NAMES)):
    raise TypeError(f"ExperimentConfig's field names must be unique across its configs: {_NAMES}")


def flat_settings(settings):
    """`{field: value}` of every field of an `ExperimentConfig` dict, nested or flat (as earlier
    versions' `config.json` holds it): one namespace, since field names are unique."""
    flat = {}
    for name, value in settings.items():
        if name in SECTIONS and isinstance(value, dict):
            flat.update(value)
        else:
            flat[name] = value
    return flat
