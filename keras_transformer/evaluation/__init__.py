"""Translation quality: sacreBLEU, chrF, the paper's tokenized BLEU, perplexity.

See docs/evaluation.md for which BLEU compares with what.
"""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "chrf": "bleu",
        "reference_sets": "bleu",
        "sacre_bleu": "bleu",
        "EvaluationScores": "evaluation_scores",
        "DEFAULT_METRICS": "files",
        "METRICS": "files",
        "read_lines": "files",
        "score_files": "files",
        "perplexity": "perplexity",
        "moses_tokenize": "tokenized_bleu",
        "multi30k_bleu": "tokenized_bleu",
        "multi_bleu": "tokenized_bleu",
        "split_hyphenated_compounds": "tokenized_bleu",
        "tokenized_bleu": "tokenized_bleu",
        "ValidationCallback": "validation_callback",
    },
)
