"""How a training run is scored: validation while training, selection, the test metrics."""

import dataclasses

from keras_transformer.experiment.settings.config_checks import check_at_least, check_choices
from keras_transformer.utils.dataclass_config import DataclassConfig, setting

# Names of `keras_transformer.evaluation.METRICS` (kept here: no evaluation import for a flag).
METRIC_NAMES = ("bleu", "chrf", "tokenized_bleu", "multi30k_bleu")
VALID_METRICS = ("bleu", "perplexity")
VALID_SEARCHES = ("greedy", "beam")


@dataclasses.dataclass(frozen=True)
class ValidationConfig(DataclassConfig):
    """Dev-split validation while training (best checkpoint, patience), selection of the
    final model on it, and the metrics of the test split.

    The paper validates nothing while training and averages without selecting
    (6.1); validation here only logs and keeps `best.weights.h5` unless
    `patience`, `select_on_valid` or `--final-model best` use it.

    Example:

    >>> ValidationConfig(validate_every_steps=1000, patience=10).best_metric
    'bleu'
    """

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
        choices=VALID_SEARCHES,
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
    metrics: tuple[str, ...] = setting(
        ("bleu", "chrf", "tokenized_bleu"),
        f"Metrics of the test split, among {', '.join(METRIC_NAMES)}.",
        choices=METRIC_NAMES,
        metavar="NAME",
    )

    def __post_init__(self):
        self.check_types()
        check_choices(
            self,
            valid_search=VALID_SEARCHES,
            best_metric=VALID_METRICS,
            select_metric=VALID_METRICS,
        )
        check_at_least(self, 1, "validate_every_steps")
        check_at_least(self, 0, "patience", "valid_max_sentences")
        if self.validate and self.valid_max_sentences == 0 and self.best_metric == "bleu":
            raise ValueError(
                "best_metric='bleu' needs valid sentences to translate; received "
                "valid_max_sentences=0 (set best_metric='perplexity' or translate some)."
            )
        unknown = sorted(set(self.metrics) - set(METRIC_NAMES))
        if unknown or not self.metrics:
            raise ValueError(
                f"`metrics` must name some of {METRIC_NAMES}. Received: metrics={self.metrics!r}"
            )
