"""The exported program: tokenize, beam search with the cache, detokenize, in one graph."""

import tensorflow as tf

from keras_transformer.decoding.beam_search import build_beam_search

# Python's `str.isspace` characters, in RE2 syntax: a row matching this (empty
# included) is blank and translates to "" without decoding, as in `Translator`.
BLANK_PATTERN = r"[\s\p{Z}\x0b\x1c-\x1f\x85]*"
TEXT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "translate_ids"


class TranslationModule(tf.Module):
    """A `tf.Module` whose functions translate strings or token ids (paper 6.1 decoding).

    It holds the model's variables, the tokenizer's SentencePiece resource and
    two `tf.function`s with fixed input signatures, traced on the TensorFlow
    backend into plain TensorFlow graphs (no XLA, no Python, no Keras at run
    time); `export_saved_model` saves them as the SavedModel signatures.

    `translate(sentences)`, the `serving_default` signature, mirrors
    `Translator.translate`: invalid UTF-8 is replaced by U+FFFD; blank rows
    (empty or whitespace only) give `""` and score 0.0 without decoding;
    other rows are tokenized, get an EOS appended as in training, are cut to
    `max_source_length` ids (EOS included, as `Translator` cuts) and decoded
    with beam search (key/value cache, GNMT length penalty) in one padded
    batch; the best hypothesis is detokenized.

    `translate_ids(token_ids)`, the `translate_ids` signature, does the same
    on SentencePiece ids the client produced with the same vocabulary:
    int32 (batch, length), right-padded with the padding id, *without* the
    EOS (appended here). A row of padding only is blank. Ids outside the
    vocabulary raise `InvalidArgumentError`.

    Args:
        model: a built `Seq2SeqTransformer` on the TensorFlow backend.
        tokenizer: its `SubwordTokenizer`.
        beam_size: int. Paper: 4.
        alpha: float. Length penalty exponent; paper: 0.6.
        max_extra_length: int. Output tokens beyond the source length; paper: 50.
        max_source_length: int. Source ids kept per row, EOS included.

    Example:

    >>> module = TranslationModule(model, tokenizer, beam_size=4, alpha=0.6,
    ...                            max_extra_length=50, max_source_length=512)
    >>> module.translate(tf.constant(["A dog runs."]))["translations"]
    """

    def __init__(self, model, tokenizer, *, beam_size, alpha, max_extra_length, max_source_length):
        super().__init__(name="translation_module")
        config = model.config
        self._pad_id = config.pad_id
        self._eos_id = tokenizer.eos_id
        self._source_vocabulary_size = config.source_vocabulary_size or config.vocabulary_size
        self._max_source_length = max_source_length
        # The state the graphs read, tracked for saving: the model's weights and
        # the SentencePiece model. The Keras objects (and their training code) are
        # not kept.
        self.model_variables = list(model.variables)
        self.sentencepiece = tokenizer.tf_trackable
        search = build_beam_search(
            model,
            bos_id=tokenizer.bos_id,
            eos_id=tokenizer.eos_id,
            beam_size=beam_size,
            alpha=alpha,
            max_extra_length=max_extra_length,
        )
        # A plain closure: a `tf.function` attribute would be saved as one more function.
        self._beam_search = lambda source: search(source)
        self.translate = tf.function(
            self._translate_text,
            input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
            autograph=False,
        )
        self.translate_ids = tf.function(
            self._translate_token_ids,
            input_signature=[tf.TensorSpec([None, None], tf.int32, name="token_ids")],
            autograph=False,
        )

    def _translate_text(self, sentences):
        sentences = tf.strings.unicode_transcode(
            sentences,
            input_encoding="UTF-8",
            output_encoding="UTF-8",
            errors="replace",
            replacement_char=0xFFFD,
        )
        blank = tf.strings.regex_full_match(sentences, BLANK_PATTERN)
        pieces = tf.cast(self.sentencepiece.tokenize(sentences), tf.int32)
        tokens, scores, truncated = self._decode(pieces, blank)
        translations = self.sentencepiece.detokenize(tokens)
        return {
            "translations": tf.where(blank, "", translations),
            "scores": scores,
            "truncated": truncated,
        }

    def _translate_token_ids(self, token_ids):
        checks = [
            tf.debugging.assert_non_negative(
                token_ids, message="`token_ids` must be >= 0 (0 is padding)."
            ),
            tf.debugging.assert_less(
                token_ids,
                self._source_vocabulary_size,
                message=f"`token_ids` must be < the vocabulary size "
                f"{self._source_vocabulary_size}.",
            ),
        ]
        with tf.control_dependencies(checks):
            pieces = tf.RaggedTensor.from_tensor(tf.identity(token_ids), padding=self._pad_id)
        blank = tf.equal(pieces.row_lengths(), 0)
        tokens, scores, truncated = self._decode(pieces, blank)
        return {
            "token_ids": tokens.to_tensor(default_value=self._pad_id),
            "scores": scores,
            "truncated": truncated,
        }

    def _decode(self, pieces, blank):
        """Ragged source pieces -> (ragged output ids without EOS, scores, truncated)."""
        eos = tf.fill(tf.stack([pieces.nrows(), 1]), tf.constant(self._eos_id, tf.int32))
        source = tf.concat([pieces, tf.RaggedTensor.from_tensor(eos)], axis=1)
        truncated = tf.logical_and(
            source.row_lengths() > self._max_source_length, tf.logical_not(blank)
        )
        source = source[:, : self._max_source_length].to_tensor(default_value=self._pad_id)
        # A blank row is all padding: its output is empty and the loop ignores it.
        source = tf.where(blank[:, None], self._pad_id, source)
        tokens, scores = self._beam_search(source)
        tokens = tf.RaggedTensor.from_tensor(tokens[:, 0], padding=self._pad_id)
        scores = tf.where(blank, 0.0, scores[:, 0])
        return tokens, scores, truncated
