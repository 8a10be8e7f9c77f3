"""The quickstart's built-in corpus: generated English-German sentence pairs with their rules.

Sentences from a small lexicon and grammar (statements, and a second domain of polite
requests), so that a model trains and translates on any machine without downloads.
"""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "generate_synthetic_pairs": "corpus",
        "write_synthetic_corpus": "corpus",
    },
)
