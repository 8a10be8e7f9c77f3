"""The data settings of a training run: corpus, languages, splits, vocabulary, batches."""

import dataclasses

from keras_transformer.data.pipeline_config import PipelineConfig
from keras_transformer.experiment.settings.config_checks import check_at_least, check_choices
from keras_transformer.utils.dataclass_config import DataclassConfig, setting

VOCABULARY_TYPES = ("bpe", "unigram")
# PipelineConfig fields a run takes from `pipeline_overrides`; it sets the others itself
# (token budget, accumulation and seed from their own fields, replicas from the distribution).
PIPELINE_OVERRIDES = ("max_length", "min_bucket_length", "bucket_growth", "length_multiple")


@dataclasses.dataclass(frozen=True)
class DataConfig(DataclassConfig):
    """What a run trains and tests on, and how its text becomes batches (paper 5.1).

    Split names are looked up as `{data_dir}/{split}.{language}` (plain or
    gzip); a split containing a path separator is a path prefix of its own
    (e.g. `data/wmt14/newstest2014`). Defaults: WMT14 en-de
    file names, a 37k shared BPE vocabulary, batches of about 25,000 tokens.

    Example:

    >>> DataConfig(data_dir="data/wmt14", test_split="newstest2014").vocabulary_size
    37000
    """

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
        "such as data/wmt14/newstest2014.",
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

    def __post_init__(self):
        self.check_types()
        check_choices(self, vocabulary_type=VOCABULARY_TYPES)
        if self.source_language == self.target_language:
            raise ValueError(
                "The source and target languages must differ. Received: "
                f"{self.source_language!r} -> {self.target_language!r}"
            )
        check_at_least(self, 1, "vocabulary_size", "token_budget")
        if len(self.synthetic_sizes) != 3 or min(self.synthetic_sizes) < 1:
            raise ValueError(
                "`synthetic_sizes` must be three positive ints (train, valid, test). "
                f"Received: synthetic_sizes={self.synthetic_sizes!r}"
            )
        unknown = sorted(set(self.pipeline_overrides) - set(PIPELINE_OVERRIDES))
        if unknown:
            raise ValueError(
                f"`pipeline_overrides` may set {', '.join(PIPELINE_OVERRIDES)} (the run sets the "
                f"other fields itself). Received: {unknown}"
            )

    @property
    def generated(self):
        """Whether the run generates its corpus (no `data_dir`, no `tfds_name`)."""
        return self.data_dir is None and self.tfds_name is None
