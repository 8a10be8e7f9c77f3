"""The TensorFlow ops of `JointVocabularyTokenizer`: two SentencePiece models, one id space."""

import re

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer import compat
from keras_transformer.text.subword_tokenizer import _SharedSentencepieceResource

# SentencePiece's word-boundary mark; decoding turns every one into a space.
WORD_BOUNDARY = "\u2581"
# What SentencePiece decodes its unknown piece to (its default `unk_surface`).
UNKNOWN_SURFACE = " \u2047 "
# Python's `str.isspace` characters in RE2 syntax (as `translation_module.BLANK_PATTERN`):
# decoded text is stripped of them, as `str.strip` strips.
_SPACE = r"[\s\p{Z}\x0b\x1c-\x1f\x85]"
# A language code opening a chunk of text: ">>" up to the first "<<" (MarianTokenizer's
# `remove_language_code`), e.g. ">>fra<<" for a multilingual model.
_LANGUAGE_CODE = r"(?s)^(>>.*?<<)(.*)$"


def _sentencepiece(proto):
    """tensorflow-text's tokenizer with pieces as output, on a shared-name resource."""
    tokenizer = tf_text.SentencepieceTokenizer(model=proto, out_type=tf.string)
    compat.share_sentencepiece_resource(tokenizer, _SharedSentencepieceResource(proto))
    return tokenizer


def piece_surfaces(target_proto, vocabulary):
    """What each id's piece contributes to decoded text, as bytes, before spaces are fixed.

    SentencePiece's `decode_pieces` gives a piece of its model its text (the
    word-boundary mark kept here, turned into a space later), a control
    piece nothing, its unknown piece " ⁇ ", a byte piece its byte; a piece it
    does not know (in a joint vocabulary, one of the other side's) comes out
    as it is.
    """
    processor = spm.SentencePieceProcessor(model_proto=target_proto)
    surfaces = []
    for piece in vocabulary:
        index = processor.piece_to_id(piece)
        if processor.id_to_piece(index) != piece:  # not in the target model
            surfaces.append(piece.encode("utf-8"))
        elif processor.is_control(index):
            surfaces.append(b"")
        elif processor.is_unknown(index):
            surfaces.append(UNKNOWN_SURFACE.encode("utf-8"))
        elif processor.is_byte(index):
            surfaces.append(bytes([int(piece[3:-1], 16)]))  # "<0xAB>"
        else:
            surfaces.append(piece.encode("utf-8"))
    return surfaces


def _flat_membership(values, members):
    """(n,) bool: which of `values` equal one of the 1-D `members`."""
    return tf.reduce_any(tf.equal(values[:, None], members[None, :]), axis=1)


class JointVocabularyOps(tf.Module):
    """Strings to joint ids and back, in TensorFlow ops only (tensorflow-text included).

    The TensorFlow side of `JointVocabularyTokenizer`, which runs it eagerly,
    in `tf.data` and in an exported graph alike, so all three give the same
    ids and text. It tracks the two SentencePiece model resources and the
    piece-to-id table, the state a SavedModel must keep.

    Tokenizing a side splits each text on the special pieces (they map to
    their ids, as in MarianTokenizer), takes a language code (`>>xx<<`) off
    the start of each remaining chunk as one piece, encodes the rest to
    pieces with that side's SentencePiece model, and maps every piece to its
    joint id (`unk_id` for a piece the vocabulary lacks). Detokenizing drops
    the special ids, joins the pieces' surfaces (`piece_surfaces`, the
    target model's), turns word-boundary marks into spaces and strips the
    ends.

    Args:
        source_proto: bytes, the source side's SentencePiece model.
        target_proto: bytes, the target side's SentencePiece model.
        vocabulary: list of str, the piece of each joint id.
        special_ids: the ids of the special pieces (padding, unknown, begin,
            end): split out of text when tokenizing, dropped when detokenizing.
        unk_id: int, the id of pieces the vocabulary lacks.
    """

    def __init__(self, source_proto, target_proto, vocabulary, special_ids, unk_id):
        super().__init__(name="joint_vocabulary_ops")
        self.source_sentencepiece = _sentencepiece(source_proto)
        self.target_sentencepiece = _sentencepiece(target_proto)
        self.piece_to_id = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocabulary, tf.string),
                tf.range(len(vocabulary), dtype=tf.int64),
            ),
            default_value=unk_id,
        )
        special_ids = sorted(set(special_ids))
        special_pieces = sorted({vocabulary[i] for i in special_ids}, key=len, reverse=True)
        self._special_pattern = "|".join(re.escape(piece) for piece in special_pieces)
        self._special_pieces = special_pieces
        self._special_ids = special_ids
        self._surfaces = piece_surfaces(target_proto, vocabulary)

    def tokenize(self, texts, side="source"):
        """(batch,) strings -> (batch, None) int32 joint ids, ragged."""
        sentencepiece = {"source": self.source_sentencepiece, "target": self.target_sentencepiece}
        chunks = self._split_special(tf.convert_to_tensor(texts, tf.string))  # (batch, chunks)
        flat = chunks.flat_values
        special = _flat_membership(flat, tf.constant(self._special_pieces, tf.string))
        code = tf.logical_and(
            tf.logical_not(special), tf.strings.regex_full_match(flat, _LANGUAGE_CODE)
        )
        rest = tf.where(code, tf.strings.regex_replace(flat, _LANGUAGE_CODE, r"\2"), flat)
        rest = tf.where(special, "", rest)
        first = tf.where(code, tf.strings.regex_replace(flat, _LANGUAGE_CODE, r"\1"), flat)
        has_first = tf.logical_or(code, special)
        firsts = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(first, has_first), tf.cast(has_first, tf.int64)
        )
        pieces = tf.concat([firsts, sentencepiece[side].tokenize(rest)], axis=1)
        pieces = tf.RaggedTensor.from_row_splits(
            pieces.flat_values, tf.gather(pieces.row_splits, chunks.row_splits)
        )
        return tf.cast(self.piece_to_id.lookup(pieces), tf.int32)

    def _split_special(self, texts):
        """(batch,) -> (batch, None) chunks: the special pieces on their own, the text between."""
        return tf_text.regex_split(
            texts, self._special_pattern, keep_delim_regex_pattern=self._special_pattern
        )

    def detokenize(self, token_ids):
        """(batch, None) int joint ids, ragged or dense -> (batch,) strings."""
        if not isinstance(token_ids, tf.RaggedTensor):
            token_ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(token_ids))
        token_ids = tf.cast(token_ids, tf.int32)
        special = tf.constant(self._special_ids, tf.int32)
        keep = tf.logical_not(_flat_membership(token_ids.flat_values, special))
        token_ids = tf.ragged.boolean_mask(token_ids, token_ids.with_flat_values(keep))
        surfaces = tf.gather(tf.constant(self._surfaces, tf.string), token_ids.flat_values)
        texts = tf.strings.reduce_join(token_ids.with_flat_values(surfaces), axis=-1)
        texts = tf.strings.regex_replace(texts, WORD_BOUNDARY, " ")
        texts = tf.strings.regex_replace(texts, f"^{_SPACE}+|{_SPACE}+$", "")
        return tf.strings.unicode_transcode(
            texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
