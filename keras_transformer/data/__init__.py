"""Input pipeline: tokenized parallel corpora batched by length within a token budget.

Builds on `keras_transformer.text`; never imports the model packages.
"""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "LengthBuckets": "length_buckets",
        "PipelineConfig": "pipeline_config",
        "PipelineSummary": "pipeline_summary",
        "TokenizedCorpus": "tokenized_corpus",
        "TranslationDataset": "translation_dataset",
        "make_translation_dataset": "translation_dataset",
    },
)
