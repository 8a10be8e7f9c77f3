"""Input pipeline: tokenized parallel corpora batched by length within a token budget.

Builds on `keras_transformer.text`; never imports the model packages.
"""

from keras_transformer.data.length_buckets import LengthBuckets
from keras_transformer.data.pipeline_config import PipelineConfig
from keras_transformer.data.pipeline_summary import PipelineSummary
from keras_transformer.data.tokenized_corpus import TokenizedCorpus
from keras_transformer.data.translation_dataset import (
    TranslationDataset,
    make_translation_dataset,
)

__all__ = [
    "LengthBuckets",
    "PipelineConfig",
    "PipelineSummary",
    "TokenizedCorpus",
    "TranslationDataset",
    "make_translation_dataset",
]
