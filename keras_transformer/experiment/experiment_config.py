"""Everything one training run needs: data, vocabulary, model, schedule, decoding, outputs."""

import dataclasses

from keras_transformer.utils.dataclass_config import DataclassConfig

DISTRIBUTIONS = ("none", "mirrored", "multi_worker", "data_parallel")
VALID_METRICS = ("bleu", "perplexity")
FINAL_MODELS = ("average", "best", "last")
# PipelineConfig fields a run takes from `pipeline_overrides`; it sets the others itself
# (token budget, accumulation and seed from their own fields, replicas from the distribution).
PIPELINE_OVERRIDES = ("max_length", "min_bucket_length", "bucket_growth", "length_multiple")


@dataclasses.dataclass(frozen=True)
class ExperimentConfig(DataclassConfig):
    """Settings of `run_experiment`; defaults are the paper's base model on WMT14 en-de.

    Split names are looked up as `{data_dir}/{split}.{language}` (plain or
    gzip); a split containing a path separator is a path prefix of its own
    (e.g. `../shared/data/newstest2014/newstest2014`). Everything the run
    writes goes under `output_dir`.
    """

    # Where the vocabulary, checkpoints, logs, translations, scores and export go (in a
    # multi-process run, process 0's; the others write in `process-i` / `worker-i` in it).
    # A run holds it (`.run.lock`) while it writes: a second run on it is refused.
    output_dir: str = "runs/experiment"
    # Folder of line-aligned `{split}.{language}` files; None generates the synthetic corpus.
    data_dir: str | None = None
    # TFDS dataset for training instead of files, e.g. "wmt14_translate/de-en" (needs `tfds`).
    tfds_name: str | None = None
    # Source and target language suffixes of the files (paper: en -> de, en -> fr).
    source_language: str = "en"
    target_language: str = "de"
    # Split names (or path prefixes) for training, model selection and the final test.
    train_split: str = "train"
    valid_split: str | None = "valid"
    test_split: str = "test"
    # Pairs of the generated corpus (train, valid, test) when `data_dir` is None.
    synthetic_sizes: tuple = (20000, 500, 500)
    # Shared source-target subword vocabulary (5.1: 37k BPE en-de, 32k word-piece en-fr).
    vocabulary_size: int = 37000
    # "bpe" (en-de) or "unigram" (SentencePiece's closest stand-in for word-pieces).
    vocabulary_type: str = "bpe"
    # Model preset of `keras_transformer.models.PRESETS` ("base", "big", "table3-B1", ...).
    preset: str = "base"
    # TransformerConfig fields overriding the preset (e.g. {"dropout": 0.1} for en-fr big).
    model_overrides: dict = dataclasses.field(default_factory=dict)
    # Padded tokens per side per replica and batch (5.1: about 25,000 per step).
    token_budget: int = 25000
    # PipelineConfig fields of the batching (`PIPELINE_OVERRIDES`), e.g.
    # {"bucket_growth": 1.2}: fewer length buckets, so fewer shapes to compile, more padding.
    pipeline_overrides: dict = dataclasses.field(default_factory=dict)
    # Batches accumulated per update, token-weighted (reproduces large batches on one device).
    accumulation_steps: int = 1
    # Optimizer updates (5.2: 100k base, 300k big); None takes the preset's.
    train_steps: int | None = None
    # Schedule warmup (5.3: 4000) and multiplier (1.0).
    warmup_steps: int = 4000
    learning_rate_scale: float = 1.0
    # Label smoothing (5.4: 0.1); None takes the preset's (Table 3 row D varies it).
    label_smoothing: float | None = None
    # Checkpoint interval (6.1: every 10 minutes) and/or every N updates.
    checkpoint_every_minutes: float | None = 10.0
    checkpoint_every_steps: int | None = None
    # Checkpoints averaged at the end (6.1: 5 base, 20 big); None takes the preset's.
    average_last: int | None = None
    # Beam search (6.1: beam 4, length penalty alpha 0.6, max output input + 50).
    beam_size: int = 4
    alpha: float = 0.6
    max_extra_length: int = 50
    # Metrics of the test split: names of `keras_transformer.evaluation.METRICS`.
    metrics: tuple = ("bleu", "chrf", "tokenized_bleu")
    # Score the valid split too: per-token perplexity (no smoothing) and BLEU (Table 3's dev).
    evaluate_valid: bool = False
    # After training, keep whichever of the kept checkpoints, their average and the best
    # checkpoint scores best on the valid split by `select_metric`; the paper averages
    # without selecting (6.1). Overrides `final_model`.
    select_on_valid: bool = False
    # What `select_on_valid` ranks by: "perplexity" (lowest) or "bleu" (highest, the
    # compiled `valid_search` on up to `valid_max_sentences` sentences).
    select_metric: str = "perplexity"
    # Validate on `valid_split` while training: dev loss, perplexity and sacreBLEU on stderr,
    # in valid_log.csv and TensorBoard; keeps checkpoints/best.weights.h5.
    validate: bool = True
    # Updates between validations; None validates at every checkpoint.
    validate_every_steps: int | None = None
    # Valid sentences translated for the BLEU of each validation (the first N of the split;
    # perplexity uses the whole split). 0 skips BLEU (then best_metric must be perplexity).
    valid_max_sentences: int = 200
    # Search of the validation BLEU: "greedy" (cheap) or "beam" (beam_size, alpha).
    valid_search: str = "greedy"
    # Metric that picks checkpoints/best.weights.h5: "bleu" (highest) or "perplexity" (lowest).
    best_metric: str = "bleu"
    # Stop after this many validations in a row without a better `best_metric`; None or 0
    # never stops early. Averaging, selection, test scores and export still run.
    patience: int | None = None
    # The model scored and exported at the end: "average" of the last `average_last`
    # checkpoints (paper 6.1), "best" (checkpoints/best.weights.h5) or "last" (the final
    # weights).
    final_model: str = "average"
    # Write a TF Serving SavedModel of the averaged model at the end.
    export: bool = True
    # "none", "mirrored" (TF, all local devices), "multi_worker" (TF, TF_CONFIG),
    # "data_parallel" (JAX keras.distribution over all devices; over several processes
    # when KERAS_DISTRIBUTION_NUM_PROCESSES > 1, see docs/architecture.md).
    distribution: str = "none"
    # Mixed precision policy: None (float32), "mixed_bfloat16" or "mixed_float16".
    precision: str | None = None
    # Updates between lines of the training log and TensorBoard points.
    log_every_steps: int = 100
    # 0 silent; 1 or 2: a progress line on stderr every `log_every_steps` updates (step of
    # max steps, loss, learning rate, tokens/s, elapsed, ETA; rewritten in place on a
    # terminal) and a line per validation.
    verbose: int = 1
    # Seed of the data order, weights and dropout.
    seed: int = 0

    def __post_init__(self):
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(
                f"`distribution` must be one of {DISTRIBUTIONS}. "
                f"Received: distribution={self.distribution!r}"
            )
        if self.source_language == self.target_language:
            raise ValueError(
                "The source and target languages must differ. Received: "
                f"{self.source_language!r} -> {self.target_language!r}"
            )
        for name in ("vocabulary_size", "token_budget", "accumulation_steps", "beam_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
        unknown = sorted(set(self.pipeline_overrides) - set(PIPELINE_OVERRIDES))
        if unknown:
            raise ValueError(
                f"`pipeline_overrides` may set {', '.join(PIPELINE_OVERRIDES)} (the run sets the "
                f"other PipelineConfig fields itself). Received: {unknown}"
            )
        if self.train_steps is not None and self.train_steps < 1:
            raise ValueError(f"`train_steps` must be >= 1. Received: {self.train_steps}")
        if self.checkpoint_every_minutes is None and self.checkpoint_every_steps is None:
            raise ValueError("Set `checkpoint_every_minutes`, `checkpoint_every_steps` or both.")
        for name, allowed in (
            ("best_metric", VALID_METRICS),
            ("select_metric", VALID_METRICS),
            ("final_model", FINAL_MODELS),
            ("valid_search", ("greedy", "beam")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"`{name}` must be one of {allowed}. Received: {name}={getattr(self, name)!r}"
                )
        for name in ("validate_every_steps", "patience", "valid_max_sentences"):
            value = getattr(self, name)
            minimum = 1 if name == "validate_every_steps" else 0
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < minimum
            ):
                raise ValueError(
                    f"`{name}` must be an int >= {minimum}"
                    + (" or None" if name != "valid_max_sentences" else "")
                    + f". Received: {name}={value!r}"
                )
        if self.validate and self.valid_max_sentences == 0 and self.best_metric == "bleu":
            raise ValueError(
                "best_metric='bleu' needs valid sentences to translate; received "
                "valid_max_sentences=0 (set best_metric='perplexity' or translate some)."
            )
        if self.precision not in (None, "mixed_bfloat16", "mixed_float16"):
            raise ValueError(
                "`precision` must be None, 'mixed_bfloat16' or 'mixed_float16'. "
                f"Received: precision={self.precision!r}"
            )
