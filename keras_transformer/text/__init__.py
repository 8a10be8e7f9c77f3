"""Text side of the input pipeline: vocabulary, tokenizer, corpora, cleaning.

Depends on keras-hub, sentencepiece and tensorflow-text; never on the model
packages (`layers`, `models`, `training`).
"""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "CleaningSummary": "cleaning_summary",
        "clean_parallel_corpus": "corpus_cleaning",
        "word_count": "corpus_cleaning",
        "JointVocabularyTokenizer": "joint_vocabulary_tokenizer",
        "MosesBpeTokenizer": "moses_bpe_tokenizer",
        "ParallelCorpus": "parallel_corpus",
        "BOS_ID": "subword_tokenizer",
        "EOS_ID": "subword_tokenizer",
        "PAD_ID": "subword_tokenizer",
        "UNK_ID": "subword_tokenizer",
        "SubwordTokenizer": "subword_tokenizer",
        "read_lines": "text_files",
        "load_tfds_corpus": "tfds_corpus",
        "TranslationTokenizer": "translation_tokenizer",
        "train_vocabulary": "vocabulary",
        "train_vocabulary_from_files": "vocabulary",
    },
)
