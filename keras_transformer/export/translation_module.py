"""The exported program: tokenize, search with the cache, detokenize, in one graph."""

import tensorflow as tf

from keras_transformer.decoding.decoding_config import DecodingConfig, get_search

# Python's `str.isspace` characters, in RE2 syntax: a row matching this (empty
# included) is blank and translates to "" without decoding, as in `Translator`.
BLANK_PATTERN = r"[\s\p{Z}\x0b\x1c-\x1f\x85]*"
TEXT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "translate_ids"


def _checked_rank(tensor, rank, message):
    """`tensor`, after a run-time check that it has `rank` dimensions.

    A signature's declared shape is not enforced when it is called (TF Serving,
    a loaded SavedModel), and the graph's own rank ops are folded to the
    declared rank: the check reads the rank from the shape passed through
    serialization, which hides it from that folding.
    """
    shape = tf.shape(tensor)
    actual = tf.size(tf.io.parse_tensor(tf.io.serialize_tensor(shape), tf.int32))
    check = tf.debugging.Assert(tf.equal(actual, rank), [f"{message}; received shape", shape])
    with tf.control_dependencies([check]):
        return tf.identity(tensor)


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
    with the strategy `decoding.search` names (beam search by default:
    key/value cache, GNMT length penalty); the first hypothesis is
    detokenized. Inside the graph the request is sorted by
    source length and decoded in sub-batches of similar length, each padded
    only to its own longest source and holding at most `batch_tokens` source
    ids (one row at least), so a long sentence slows only its own sub-batch;
    outputs come back in request order.

    `translate_ids(token_ids)`, the `translate_ids` signature, does the same
    on token ids the client produced with the same tokenizer:
    int32 (batch, length), right-padded with the padding id, *without* the
    EOS (appended here). A row of padding only is blank. Ids outside the
    vocabulary raise `InvalidArgumentError`.

    Args:
        model: a built `Seq2SeqTransformer` on the TensorFlow backend.
        tokenizer: its `SubwordTokenizer` or `JointVocabularyTokenizer`
            (`tf_trackable` gives the graph's tokenize and detokenize).
        decoding: a `DecodingConfig` (None: the paper's settings): the
            search and its settings, extra length, `max_source_length` (None:
            `DecodingConfig.source_length_limit`) and `batch_tokens`, the
            upper bound on rows x padded source length of a sub-batch (as
            `Translator`'s).
        **settings: single `DecodingConfig` fields, applied over `decoding`.

    Example:

    >>> module = TranslationModule(model, tokenizer, DecodingConfig(max_source_length=512))
    >>> module.translate(tf.constant(["A dog runs."]))["translations"]
    """

    def __init__(
        self,
        model,
        tokenizer,
        decoding=None,
        **settings,
    ):
        super().__init__(name="translation_module")
        decoding = DecodingConfig.from_settings(decoding, **settings)
        self._batch_tokens = decoding.batch_token_limit()
        self._max_extra_length = decoding.max_extra_length
        config = model.config
        self._pad_id = config.pad_id
        self._eos_id = tokenizer.eos_id
        self._source_eos = config.source_eos
        self._source_vocabulary_size = config.source_vocabulary_size or config.vocabulary_size
        self._max_source_length = decoding.kept_source_length(config)
        # The state the graphs read, tracked for saving: the model's weights and
        # the tokenizer's resources (SentencePiece models, lookup tables). The Keras
        # objects (and their training code) are not kept.
        self.model_variables = list(model.variables)
        self.sentencepiece = tokenizer.tf_trackable
        # The strategy `decoding.search` names, fixed in the graph with its settings.
        search = get_search(decoding.search)(
            model, decoding, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id
        )
        # A plain closure: a `tf.function` attribute would be saved as one more function.
        self._search = lambda source: search(source)
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
        sentences = _checked_rank(
            sentences,
            1,
            "`sentences` must be a 1-D string tensor of shape [batch], one sentence each",
        )
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
        token_ids = _checked_rank(
            token_ids, 2, "`token_ids` must be a 2-D int32 tensor of shape [batch, length]"
        )
        checks = [
            tf.debugging.assert_non_negative(token_ids, message="`token_ids` must be >= 0."),
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
        source = pieces
        if self._source_eos:  # as the model was trained (`TransformerConfig.source_eos`)
            eos = tf.fill(tf.stack([pieces.nrows(), 1]), tf.constant(self._eos_id, tf.int32))
            source = tf.concat([pieces, tf.RaggedTensor.from_tensor(eos)], axis=1)
        truncated = tf.logical_and(
            source.row_lengths() > self._max_source_length, tf.logical_not(blank)
        )
        source = source[:, : self._max_source_length]
        lengths = tf.where(blank, tf.constant(0, tf.int64), source.row_lengths())
        source = source.to_tensor(default_value=self._pad_id)
        # A blank row is all padding: its output is empty and the loop ignores it.
        source = tf.where(blank[:, None], self._pad_id, source)
        tokens, scores = self._decode_by_length(source, tf.cast(lengths, tf.int32))
        tokens = tf.RaggedTensor.from_tensor(tokens, padding=self._pad_id)
        scores = tf.where(blank, 0.0, scores)
        return tokens, scores, truncated

    def _decode_by_length(self, source, lengths):
        """(rows, length) ids, (rows,) lengths -> best (rows, length + extra + 1) ids, scores.

        Rows are decoded in order of length, in sub-batches of consecutive
        rows whose count times their longest length stays within
        `batch_tokens`; each is cut to its longest row, so the loop of a
        sub-batch of short rows neither runs the steps nor holds the cache a
        long row needs.
        """
        order = tf.argsort(lengths, stable=True)
        sorted_source = tf.gather(source, order)
        sorted_lengths = tf.gather(lengths, order)
        num_rows = tf.shape(source)[0]
        width = tf.shape(source)[1] + self._max_extra_length + 1

        def decode_sub_batch(start, tokens, scores):
            # Sorted lengths make count x longest grow with the count: the rows
            # that fit are the ones whose prefix cost is within the budget.
            counts = tf.range(1, num_rows - start + 1)
            costs = counts * tf.maximum(sorted_lengths[start:], 1)
            end = start + tf.maximum(
                1, tf.reduce_sum(tf.cast(costs <= self._batch_tokens, tf.int32))
            )
            longest = tf.maximum(sorted_lengths[end - 1], 1)
            sub_tokens, sub_scores = self._search(sorted_source[start:end, :longest])
            sub_tokens = sub_tokens[:, 0]  # (rows, longest + extra + 1)
            padding = [[0, 0], [0, width - tf.shape(sub_tokens)[1]]]
            sub_tokens = tf.pad(sub_tokens, padding, constant_values=self._pad_id)
            return (
                end,
                tokens.write(tokens.size(), sub_tokens),
                scores.write(scores.size(), sub_scores[:, 0]),
            )

        # Each array starts with an empty (0-row) element, so that an empty
        # request concatenates to empty outputs.
        tokens = tf.TensorArray(tf.int32, size=1, dynamic_size=True, infer_shape=False)
        tokens = tokens.write(0, tf.zeros(tf.stack([0, width]), tf.int32))
        scores = tf.TensorArray(tf.float32, size=1, dynamic_size=True, infer_shape=False)
        scores = scores.write(0, tf.zeros([0], tf.float32))
        _, tokens, scores = tf.while_loop(
            lambda start, tokens, scores: start < num_rows,
            decode_sub_batch,
            (tf.constant(0), tokens, scores),
        )
        # Back to request order.
        inverse = tf.math.invert_permutation(order)
        tokens = tf.reshape(tokens.concat(), tf.stack([-1, width]))
        scores = tf.reshape(scores.concat(), [-1])
        return tf.gather(tokens, inverse), tf.gather(scores, inverse)
