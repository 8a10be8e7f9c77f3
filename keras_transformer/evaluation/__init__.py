"""Translation quality: sacreBLEU, chrF, the paper's tokenized BLEU, perplexity.

See docs/evaluation.md for which BLEU compares with what.
"""

from keras_transformer.evaluation.bleu import chrf, reference_sets, sacre_bleu
from keras_transformer.evaluation.evaluation_scores import EvaluationScores
from keras_transformer.evaluation.files import (
    DEFAULT_METRICS,
    METRICS,
    read_lines,
    score_files,
)
from keras_transformer.evaluation.perplexity import perplexity
from keras_transformer.evaluation.tokenized_bleu import (
    moses_tokenize,
    multi30k_bleu,
    multi_bleu,
    split_hyphenated_compounds,
    tokenized_bleu,
)
from keras_transformer.evaluation.validation_callback import ValidationCallback

__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "EvaluationScores",
    "ValidationCallback",
    "chrf",
    "moses_tokenize",
    "multi30k_bleu",
    "multi_bleu",
    "perplexity",
    "read_lines",
    "reference_sets",
    "sacre_bleu",
    "score_files",
    "split_hyphenated_compounds",
    "tokenized_bleu",
]
