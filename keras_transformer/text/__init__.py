"""Text side of the input pipeline: vocabulary, tokenizer, corpora, cleaning, synthetic data.

Depends on keras-hub, sentencepiece and tensorflow-text; never on the model
packages (`layers`, `models`, `training`).
"""

from keras_transformer.text.cleaning_summary import CleaningSummary
from keras_transformer.text.corpus_cleaning import clean_parallel_corpus, word_count
from keras_transformer.text.parallel_corpus import ParallelCorpus
from keras_transformer.text.subword_tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    SubwordTokenizer,
)
from keras_transformer.text.synthetic_corpus import (
    generate_synthetic_pairs,
    write_synthetic_corpus,
)
from keras_transformer.text.text_files import read_lines
from keras_transformer.text.tfds_corpus import load_tfds_corpus
from keras_transformer.text.vocabulary import train_vocabulary, train_vocabulary_from_files

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "PAD_ID",
    "UNK_ID",
    "CleaningSummary",
    "ParallelCorpus",
    "SubwordTokenizer",
    "clean_parallel_corpus",
    "generate_synthetic_pairs",
    "load_tfds_corpus",
    "read_lines",
    "train_vocabulary",
    "train_vocabulary_from_files",
    "word_count",
    "write_synthetic_corpus",
]
