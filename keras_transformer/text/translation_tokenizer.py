"""The tokenizer contract: what decoding, export and training ask of a tokenizer."""


class TranslationTokenizer:
    """Mixin naming what the package uses of a tokenizer; both tokenizers inherit it.

    A tokenizer of this package is a registered, serializable keras-hub
    tokenizer layer (`get_config` holds everything, SentencePiece models as
    base64) that also provides:

    - `pad_id`, `unk_id`, `bos_id` (the decoder's first input), `eos_id`:
      ints.
    - `vocabulary_size()`, `get_vocabulary()` (the piece of each id),
      `id_to_token(id)`, `token_to_id(piece)`.
    - `tokenize(texts)` / calling the layer: source text to ids, without
      begin or end ids. A `tf.RaggedTensor` inside `tf.data` or a
      `tf.function`; eagerly, lists of ids (one list for one str).
    - `tokenize_target(texts)`: target text to ids, the same way (the
      labels of training).
    - `detokenize(ids)`: target ids to text, special ids dropped; a string
      tensor in a `tf.function`, eagerly a list of str (a str for one row).
    - `tf_trackable`: a `tf.Module` whose `tokenize(strings)` and
      `detokenize(ragged ids)` are the same computation in TensorFlow and
      tensorflow-text ops, and which tracks its resources: what an exported
      SavedModel runs and keeps. A tokenizer that runs in Python only
      raises here, and the exports refuse it.
    - `source_vocabulary()`, `target_vocabulary()`: the pieces CTranslate2
      maps to ids, in id order.
    - `sentencepiece_files()`: `{file name: serialized SentencePiece model}`,
      copied next to an export so that its users can make pieces.

    This class gives the defaults of a tokenizer with one vocabulary used
    the same way on both sides; a tokenizer overrides what differs.
    """

    @property
    def has_vocabulary(self):
        """Whether the tokenizer holds its models (a keras-hub layer may be made empty)."""
        return True

    def tokenize_target(self, inputs):
        """Target text to ids: by default as `tokenize`."""
        return self.tokenize(inputs)

    def source_vocabulary(self):
        """The source pieces in id order."""
        return self.get_vocabulary()

    def target_vocabulary(self):
        """The target pieces in id order."""
        return self.get_vocabulary()

    def sentencepiece_files(self):
        """`{file name: bytes}`: the SentencePiece models an export ships."""
        raise NotImplementedError(f"{type(self).__name__} does not name its SentencePiece models.")
