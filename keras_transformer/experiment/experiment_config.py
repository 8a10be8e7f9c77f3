"""Everything one training run needs: data, vocabulary, model, schedule, decoding, outputs."""

import dataclasses

from keras_transformer.data.pipeline_config import PipelineConfig
from keras_transformer.models.presets import PRESETS, get_preset
from keras_transformer.models.transformer_config import TransformerConfig
from keras_transformer.utils.dataclass_config import DataclassConfig, setting
from keras_transformer.utils.numeric_settings import check_decoding_settings

DISTRIBUTIONS = ("none", "mirrored", "multi_worker", "data_parallel")
PRECISIONS = ("mixed_bfloat16", "mixed_float16")
VOCABULARY_TYPES = ("bpe", "unigram")
# Names of `keras_transformer.evaluation.METRICS` (kept here: no evaluation import for a flag).
METRIC_NAMES = ("bleu", "chrf", "tokenized_bleu", "multi30k_bleu")
VALID_METRICS = ("bleu", "perplexity")
FINAL_MODELS = ("average", "best", "last")
# PipelineConfig fields a run takes from `pipeline_overrides`; it sets the others itself
# (token budget, accumulation and seed from their own fields, replicas from the distribution).
PIPELINE_OVERRIDES = ("max_length", "min_bucket_length", "bucket_growth", "length_multiple")
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
class ExperimentConfig(DataclassConfig):
    """Settings of `run_experiment`; defaults are the paper's base model on WMT14 en-de.

    Split names are looked up as `{data_dir}/{split}.{language}` (plain or
    gzip); a split containing a path separator is a path prefix of its own
    (e.g. `../shared/data/newstest2014/newstest2014`). Everything the run
    writes goes under `output_dir`. Every field is a flag of the recipes and
    `keras-transformer train` (`--field-name`, or the field's `flag`), with
    the field's help text; invalid values raise ValueError naming the field.
    """

    output_dir: str = setting(
        "runs/experiment",
        "Everything is written here (in a multi-process run, process 0's; the others write "
        "in worker-i / process-i in it); a rerun resumes from it, and a second run on a "
        "directory in use is refused.",
    )
    data_dir: str | None = setting(
        None,
        "Folder of line-aligned {split}.{language} files (plain or .gz); none generates the "
        "synthetic corpus.",
    )
    tfds_name: str | None = setting(
        None,
        "Train on a TFDS dataset instead (e.g. wmt14_translate/de-en; needs the `tfds` extra "
        "and its download or a local TFDS data dir).",
        flag="--tfds",
    )
    source_language: str = setting("en", "Source file suffix (paper: en).")
    target_language: str = setting("de", "Target file suffix (paper: de, fr).")
    train_split: str = setting("train", "Training split name or path prefix.")
    valid_split: str | None = setting(
        "valid",
        "Development split for model selection and dev scores (Table 3's dev, newstest2013 in "
        "the paper); none for no development split.",
    )
    test_split: str = setting(
        "test",
        "Split translated and scored at the end; a name under --data-dir or a path prefix "
        "such as ../data/newstest2014/newstest2014.",
    )
    synthetic_sizes: tuple[int, ...] = setting(
        (20000, 500, 500), "Pairs of the generated corpus (train valid test) without --data-dir."
    )
    vocabulary_size: int = setting(
        37000, "Shared source-target subword vocabulary size (5.1: 37k BPE en-de, 32k en-fr)."
    )
    vocabulary_type: str = setting(
        "bpe",
        "bpe (en-de) or unigram (SentencePiece's closest stand-in for word-pieces, en-fr).",
        choices=VOCABULARY_TYPES,
    )
    vocabulary_lowercase: bool = setting(
        False,
        "Case-fold all text in the vocabulary (SentencePiece's nmt_nfkc_cf), as the Multi30k "
        "literature's lowercased training text: the model reads and writes lowercase, and the "
        "run's BLEU and chrF (valid and test) ignore case, as their signatures say (case:lc).",
    )
    vocabulary_file: str | None = setting(
        None,
        "Use this SentencePiece .model file (ids: <pad> 0, <unk> 1, <s> 2, </s> 3, as "
        "keras-transformer's vocabularies) instead of training one; its size is the file's "
        "(--vocabulary-size and --vocabulary-type are refused with it).",
        flag="--vocabulary",
        metavar="FILE",
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
    token_budget: int = setting(
        25000, "Padded tokens per side per device and batch (5.1: about 25000)."
    )
    pipeline_overrides: dict = dataclasses.field(
        default_factory=dict,
        metadata=dict(
            help="Change how training batches are made: max_length, min_bucket_length, "
            "bucket_growth or length_multiple of PipelineConfig (repeatable). E.g. "
            "bucket_growth=1.2 gives fewer batch shapes (fewer XLA compiles) for more padding.",
            flag="--pipeline-override",
            metavar="FIELD=VALUE",
            override_of=PipelineConfig,
            override_fields=PIPELINE_OVERRIDES,
        ),
    )
    accumulation_steps: int = setting(
        1,
        "Batches accumulated into one update, token-weighted; 8 on one device gives the "
        "paper's 8-GPU batch.",
    )
    train_steps: int | None = setting(
        None,
        "Optimizer updates (5.2: 100k base, 300k big); none takes the preset's.",
        flag="--max-steps",
    )
    warmup_steps: int = setting(4000, "Learning-rate warmup steps (5.3: 4000).")
    learning_rate_scale: float = setting(1.0, "Multiplier of the schedule (paper: 1).")
    warmup_initial_rate: float = setting(
        0.0, "Rate the linear warmup starts from (paper: 0; fairseq's --warmup-init-lr: 1e-7)."
    )
    clip_norm: float | None = setting(
        None, "Clip each update's gradient to this global norm (paper: none; fairseq: 25)."
    )
    adam_epsilon: float = setting(1e-9, "Adam's epsilon (5.3: 1e-9; fairseq's default: 1e-8).")
    label_smoothing: float | None = setting(
        None, "Label smoothing (5.4: 0.1); none takes the preset's (Table 3 row D varies it)."
    )
    checkpoint_every_minutes: float | None = setting(
        10.0, "Minutes between checkpoints (6.1: 10); none for steps only."
    )
    checkpoint_every_steps: int | None = setting(
        None, "Updates between checkpoints; none for minutes only."
    )
    average_last: int | None = setting(
        None,
        "Checkpoints averaged at the end (6.1: 5 base, 20 big); 1 keeps the last checkpoint "
        "without averaging; none takes the preset's.",
    )
    keep_checkpoints: int | None = setting(
        None,
        "Checkpoints kept on disk, the newest (older ones are deleted); none: as many as "
        "are averaged, at least 5. Keeping more lets you average other spans after training "
        "(keras-transformer average), and --select-on-valid also tries their average.",
    )
    beam_size: int = setting(4, "Beam width (6.1: 4).")
    alpha: float = setting(0.6, "Length penalty (6.1: 0.6).")
    max_extra_length: int = setting(50, "Output tokens beyond the input's (6.1: 50).")
    metrics: tuple[str, ...] = setting(
        ("bleu", "chrf", "tokenized_bleu"),
        f"Metrics of the test split, among {', '.join(METRIC_NAMES)}.",
        choices=METRIC_NAMES,
        metavar="NAME",
    )
    evaluate_valid: bool = setting(
        False, "Score the valid split too: per-token perplexity and BLEU (Table 3's dev)."
    )
    select_on_valid: bool = setting(
        False,
        "After training, keep whichever of the kept checkpoints, their average (and with "
        "--keep-checkpoints the average of all kept) and the best checkpoint scores best on "
        "--valid-split by --select-metric (the paper averages without selecting, 6.1). "
        "Overrides --final-model.",
    )
    select_metric: str = setting(
        "perplexity",
        "What --select-on-valid ranks by: perplexity (lowest) or bleu (highest, with "
        "--valid-search on up to --valid-max-sentences sentences).",
        choices=VALID_METRICS,
    )
    validate: bool = setting(
        True,
        "Validate on --valid-split while training: dev loss, perplexity and sacreBLEU on "
        "stderr, in valid_log.csv and TensorBoard; keeps checkpoints/best.weights.h5.",
    )
    validate_every_steps: int | None = setting(
        None, "Updates between validations; none validates at every checkpoint."
    )
    valid_max_sentences: int = setting(
        200,
        "Valid sentences translated for each validation's BLEU (the first N of the split; "
        "perplexity uses the whole split); 0 skips BLEU (then --best-metric perplexity).",
    )
    valid_search: str = setting(
        "greedy",
        "Search of the validation BLEU: greedy (cheap) or beam (--beam-size, --alpha).",
        choices=("greedy", "beam"),
    )
    best_metric: str = setting(
        "bleu",
        "Metric that picks checkpoints/best.weights.h5: bleu (highest) or perplexity (lowest).",
        choices=VALID_METRICS,
    )
    patience: int | None = setting(
        None,
        "Stop after this many validations in a row without a better --best-metric; none or 0 "
        "never stops early. Averaging, selection, test scores and export still run.",
    )
    final_model: str = setting(
        "average",
        "The model scored and exported at the end: average of the last --average-last "
        "checkpoints (paper 6.1), best (checkpoints/best.weights.h5) or last (final weights).",
        choices=FINAL_MODELS,
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
    precision: str | None = setting(
        None,
        "Mixed precision policy (logits, loss and softmax stay float32); none is float32.",
        choices=PRECISIONS,
    )
    log_every_steps: int = setting(
        100, "Updates between lines of the training log and TensorBoard points."
    )
    verbose: int = setting(
        1,
        "0 silent; 1 or 2: a progress line on stderr every --log-every-steps updates (step of "
        "max steps, loss, learning rate, tokens/s, elapsed, ETA; rewritten in place on a "
        "terminal) and a line per validation.",
        choices=(0, 1, 2),
    )
    divergence_check: bool = setting(
        True,
        "Stop the run when the training loss stays far above its running level (more than "
        "twice it and 1 nat above it) for --divergence-steps updates: a diverged run, "
        "stopped before its checkpoints replace the good ones (docs/training.md).",
    )
    divergence_steps: int = setting(
        200, "Updates the loss must stay far above its running level to stop the run."
    )
    seed: int = setting(0, "Seed of the data order, weights and dropout.")

    def __post_init__(self):
        self.check_types()
        for name, choices in (
            ("distribution", DISTRIBUTIONS),
            ("precision", (None, *PRECISIONS)),
            ("vocabulary_type", VOCABULARY_TYPES),
            ("verbose", (0, 1, 2)),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"`{name}` must be one of {choices}. Received: {name}={getattr(self, name)!r}"
                )
        if self.source_language == self.target_language:
            raise ValueError(
                "The source and target languages must differ. Received: "
                f"{self.source_language!r} -> {self.target_language!r}"
            )
        _at_least(self, 1, "vocabulary_size", "token_budget", "accumulation_steps", "beam_size")
        _at_least(self, 1, "train_steps", "warmup_steps", "log_every_steps", "average_last")
        _at_least(self, 1, "checkpoint_every_steps", "keep_checkpoints")
        kept, averaged = self.checkpoints_kept(), self.checkpoints_averaged()
        if self.final_model == "average" and kept < averaged:
            raise ValueError(
                f"`keep_checkpoints` must be >= the checkpoints averaged at the end "
                f"({averaged}). Received: keep_checkpoints={kept}"
            )
        _at_least(self, 0, "max_extra_length", "seed", "alpha")
        _at_least(self, 1, "divergence_steps")
        check_decoding_settings(
            beam_size=self.beam_size, alpha=self.alpha, max_extra_length=self.max_extra_length
        )
        for name in ("learning_rate_scale", "checkpoint_every_minutes"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"`{name}` must be > 0. Received: {name}={value!r}")
        if self.label_smoothing is not None and not 0 <= self.label_smoothing < 1:
            raise ValueError(
                f"`label_smoothing` must be in [0, 1). Received: {self.label_smoothing!r}"
            )
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"`clip_norm` must be positive or None. Received: {self.clip_norm!r}")
        if not self.adam_epsilon > 0:
            raise ValueError(f"`adam_epsilon` must be positive. Received: {self.adam_epsilon!r}")
        _at_least(self, 0, "warmup_initial_rate")
        if self.checkpoint_every_minutes is None and self.checkpoint_every_steps is None:
            raise ValueError("Set `checkpoint_every_minutes`, `checkpoint_every_steps` or both.")
        for name in ("validate_every_steps", "patience", "valid_max_sentences"):
            value = getattr(self, name)
            minimum = 1 if name == "validate_every_steps" else 0
            if value is not None and value < minimum:
                raise ValueError(f"`{name}` must be >= {minimum}. Received: {name}={value!r}")
        if self.validate and self.valid_max_sentences == 0 and self.best_metric == "bleu":
            raise ValueError(
                "best_metric='bleu' needs valid sentences to translate; received "
                "valid_max_sentences=0 (set best_metric='perplexity' or translate some)."
            )
        if len(self.synthetic_sizes) != 3 or min(self.synthetic_sizes) < 1:
            raise ValueError(
                "`synthetic_sizes` must be three positive ints (train, valid, test). "
                f"Received: synthetic_sizes={self.synthetic_sizes!r}"
            )
        unknown = sorted(set(self.metrics) - set(METRIC_NAMES))
        if unknown or not self.metrics:
            raise ValueError(
                f"`metrics` must name some of {METRIC_NAMES}. Received: metrics={self.metrics!r}"
            )
        get_preset(self.preset)
        self.model_config()
        self._check_starting_point()
        self.pipeline_config()

    def _check_starting_point(self):
        """`init_from` and `vocabulary_file` (their files are checked when the run starts)."""
        if self.init_from is None:
            return
        if self.vocabulary_file is not None:
            raise ValueError(
                "`init_from` and `vocabulary_file` both choose the tokenizer: --init-from "
                "uses the model file's own. Received both."
            )
        fixed = sorted(set(self.model_overrides) - set(INIT_FROM_OVERRIDES))
        if fixed:
            raise ValueError(
                f"`model_overrides` may set only {', '.join(INIT_FROM_OVERRIDES)} with "
                f"`init_from` (the architecture is the model file's). Received: {fixed}"
            )

    def checkpoints_averaged(self):
        """`average_last`, or the preset's number of averaged checkpoints (6.1)."""
        if self.average_last is not None:
            return self.average_last
        return get_preset(self.preset).averaged_checkpoints

    def checkpoints_kept(self):
        """`keep_checkpoints`, or as many as are averaged and at least 5."""
        if self.keep_checkpoints is not None:
            return self.keep_checkpoints
        return max(self.checkpoints_averaged(), 5)

    def model_config(self, vocabulary_size=None):
        """The run's `TransformerConfig`: the preset with `model_overrides` applied.

        Args:
            vocabulary_size: int, the trained vocabulary's; None uses `vocabulary_size`.
        """
        _check_overrides(self.model_overrides, "model_overrides", MODEL_OVERRIDES)
        try:
            return get_preset(self.preset).config(
                vocabulary_size or self.vocabulary_size, **self.model_overrides
            )
        except ValueError as error:
            raise ValueError(
                f"model settings (preset {self.preset!r} with --model-override "
                f"{self.model_overrides}): {error}"
            ) from None

    def pipeline_config(self, **settings):
        """The training batches' `PipelineConfig` (`settings` set the run's own fields)."""
        _check_overrides(self.pipeline_overrides, "pipeline_overrides", PIPELINE_OVERRIDES)
        try:
            return PipelineConfig(
                token_budget=self.token_budget,
                accumulation_steps=self.accumulation_steps,
                seed=self.seed,
                **{**self.pipeline_overrides, **settings},
            )
        except ValueError as error:
            raise ValueError(
                f"batching settings (--token-budget {self.token_budget} with "
                f"--pipeline-override {self.pipeline_overrides}): {error}"
            ) from None


def _at_least(config, minimum, *names):
    for name in names:
        value = getattr(config, name)
        if value is not None and value < minimum:
            raise ValueError(f"`{name}` must be >= {minimum}. Received: {name}={value!r}")


def _check_overrides(overrides, name, allowed):
    unknown = sorted(set(overrides) - set(allowed))
    if unknown:
        raise ValueError(
            f"`{name}` may set {', '.join(allowed)} (the run sets the other fields itself). "
            f"Received: {unknown}"
        )
