"""Extra training pairs of a run (e.g. back-translations), and the tag of their sources."""

import dataclasses

from keras_transformer.utils.dataclass_config import DataclassConfig, setting


@dataclasses.dataclass(frozen=True)
class ExtraDataConfig(DataclassConfig):
    """One pair of line-aligned files that joins a run's training data, optionally tagged.

    Validation and test are unchanged. With `tag_extra`, every extra source
    starts with a reserved tag, as in tagged back-translation (Caswell et al.,
    2019); the default adds nothing.

    Example:

    >>> ExtraDataConfig(extra_source="bt.en", extra_target="news.de", tag_extra=True).tag_extra
    True
    """

    extra_source: str | None = setting(
        None,
        "Extra source-language training file (e.g. back-translations), line-aligned with "
        "--extra-target; its pairs join the training data only (concatenate several pairs "
        "into one).",
        metavar="FILE",
    )
    extra_target: str | None = setting(
        None,
        "Extra target-language training file, line-aligned with --extra-source.",
        metavar="FILE",
    )
    tag_extra: bool = setting(
        False,
        "Start every --extra-source line with the reserved tag <bt>, one vocabulary piece "
        "(tagged back-translation, Caswell et al. 2019); the model then tells synthetic "
        "sources from real ones.",
    )

    def __post_init__(self):
        self.check_types()
        if (self.extra_source is None) != (self.extra_target is None):
            given, missing = ("--extra-source", "--extra-target")[
                :: 1 if self.extra_target is None else -1
            ]
            raise ValueError(f"{given} needs {missing} (a line-aligned pair of files).")
        if self.tag_extra and self.extra_source is None:
            raise ValueError(
                "--tag-extra needs --extra-source and --extra-target (the files it tags)."
            )
