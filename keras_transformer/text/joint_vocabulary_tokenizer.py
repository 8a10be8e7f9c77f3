"""Source and target SentencePiece models over one joint vocabulary (Marian / OPUS-MT)."""

import base64
import os

import keras
import sentencepiece as spm
import tensorflow as tf
from keras_hub.tokenizers import Tokenizer

from keras_transformer import compat
from keras_transformer.text.joint_vocabulary_ops import JointVocabularyOps
from keras_transformer.text.marian_vocabulary import (
    SOURCE_MODEL_FILE,
    TARGET_MODEL_FILE,
    read_marian_vocabulary,
)
from keras_transformer.text.subword_tokenizer import proto_to_bytes
from keras_transformer.text.translation_tokenizer import TranslationTokenizer

SPECIAL_ID_NAMES = ("pad_id", "unk_id", "bos_id", "eos_id")
# keras-hub's input handling (strings or tensors, batched or not), as its own tokenizers use.
convert_to_ragged_batch, preprocessing_function = compat.keras_hub_preprocessing()


def _check_proto(proto, name):
    proto = proto_to_bytes(proto)
    try:
        spm.SentencePieceProcessor(model_proto=proto)
    except RuntimeError as error:
        raise ValueError(f"`{name}` is not a valid SentencePiece model: {error}") from None
    return proto


def _check_vocabulary(vocabulary, special_ids):
    if isinstance(vocabulary, str) or not all(isinstance(p, str) for p in vocabulary):
        raise TypeError("`vocabulary` must be a list of str, the piece of each id.")
    vocabulary = list(vocabulary)
    if len(set(vocabulary)) != len(vocabulary):
        seen, repeated = set(), None
        for piece in vocabulary:
            repeated = piece if piece in seen and repeated is None else repeated
            seen.add(piece)
        raise ValueError(f"`vocabulary` holds {repeated!r} more than once.")
    for name, value in special_ids.items():
        if isinstance(value, bool) or not isinstance(value, int):
            value = None
        if value is None or not 0 <= value < len(vocabulary):
            raise ValueError(
                f"`{name}` must be an id of the vocabulary (0 to {len(vocabulary) - 1}). "
                f"Received: {name}={special_ids[name]!r}"
            )
    if special_ids["eos_id"] in (special_ids["pad_id"], special_ids["unk_id"]):
        raise ValueError(
            f"`eos_id` must differ from `pad_id` and `unk_id`. Received: {special_ids}"
        )
    return vocabulary


@keras.saving.register_keras_serializable(package="keras_transformer")
class JointVocabularyTokenizer(Tokenizer, TranslationTokenizer):
    """Source and target SentencePiece models mapping pieces into one joint vocabulary.

    The tokenizer of Marian / OPUS-MT models: each side has its own
    SentencePiece model, and the pieces of both map to ids through one
    vocabulary (a Marian folder's `vocab.json`). It gives the ids and text
    of transformers' `MarianTokenizer` (with `skip_special_tokens=True`):

    - `tokenize` (and calling the layer) encodes *source* text with the
      source model and maps the pieces to ids, `unk_id` for a piece not in
      the vocabulary; `tokenize_target` does the same with the target model.
      The special pieces (those of the special ids) written in the text map
      to their ids, and a language code opening the text (`>>fra<<`) is one
      piece. No end id is appended (the input pipeline and `Translator` do).
    - `detokenize` maps *target* ids to pieces, drops the special ids and
      decodes the rest as the target model does.

    It runs the same TensorFlow ops (`JointVocabularyOps`) eagerly, in
    `tf.data` and in an exported graph. The config stores both models as
    base64 text, so `from_config(get_config())` rebuilds it without files.

    Differences from `MarianTokenizer`: tokens added to it later
    (`add_tokens`) are not split out of the text, and separate source and
    target vocabularies (`separate_vocabs`) are not supported.

    Args:
        source_proto: the source side's SentencePiece model: bytes, a path
            to the model file, or the base64 text of `get_config`.
        target_proto: the target side's model, likewise.
        vocabulary: list of str, the piece of each id (`vocab.json`
            inverted).
        pad_id: int. Padding (Marian: the last id).
        unk_id: int. Pieces not in the vocabulary.
        bos_id: int. The decoder's first input (Marian starts from the
            padding id).
        eos_id: int. Appended to sources; ends outputs (Marian: 0).
        **kwargs: base layer arguments (`name`, ...).

    Example:

    >>> tokenizer = JointVocabularyTokenizer.from_marian_directory("opus-mt-en-de")
    >>> ids = tokenizer(["A dog runs."])        # [[...]] joint ids, no end id
    >>> tokenizer.detokenize(ids)               # target text of these ids
    """

    def __init__(
        self, source_proto, target_proto, vocabulary, *, pad_id, unk_id, bos_id, eos_id, **kwargs
    ):
        kwargs.pop("dtype", None)  # always int32 ids
        super().__init__(dtype="int32", **kwargs)
        special_ids = dict(zip(SPECIAL_ID_NAMES, (pad_id, unk_id, bos_id, eos_id), strict=True))
        self.vocabulary = _check_vocabulary(vocabulary, special_ids)
        self.source_proto = _check_proto(source_proto, "source_proto")
        self.target_proto = _check_proto(target_proto, "target_proto")
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = (pad_id, unk_id, bos_id, eos_id)
        self._token_to_id = {piece: index for index, piece in enumerate(self.vocabulary)}
        self._ops = JointVocabularyOps(
            self.source_proto,
            self.target_proto,
            self.vocabulary,
            special_ids=special_ids.values(),
            unk_id=unk_id,
        )
        # keras-hub conventions (samplers, packers) read these attribute names.
        self._add_special_token(self.vocabulary[pad_id], "pad_token")
        self._add_special_token(self.vocabulary[bos_id], "start_token")
        self._add_special_token(self.vocabulary[eos_id], "end_token")
        self.built = True

    @classmethod
    def from_marian_directory(cls, path):
        """The tokenizer of a Hugging Face Marian folder (`save_pretrained`).

        Reads `source.spm`, `target.spm` and `vocab.json`, and the special
        ids from `config.json` (`pad_token_id`, `eos_token_id`,
        `decoder_start_token_id`) where present, else from the vocabulary's
        `<pad>` and `</s>`; `<unk>` (or `tokenizer_config.json`'s
        `unk_token`) is the unknown piece.

        Args:
            path: str or path-like, the folder.

        Returns:
            A `JointVocabularyTokenizer`.

        Raises:
            FileNotFoundError: a file is missing.
            ValueError: the files disagree (ids not 0..n-1, a special piece
                missing, separate source and target vocabularies).
        """
        return cls(**read_marian_vocabulary(os.fspath(path)))

    @property
    def tf_trackable(self):
        """The `JointVocabularyOps` module: its resources go into exported graphs."""
        return self._ops

    def vocabulary_size(self):
        return len(self.vocabulary)

    def get_vocabulary(self):
        return list(self.vocabulary)

    def id_to_token(self, id):
        if not 0 <= id < len(self.vocabulary):
            raise ValueError(
                f"`id` must be in range [0, {len(self.vocabulary) - 1}]. Received: {id}"
            )
        return self.vocabulary[id]

    def token_to_id(self, token):
        return self._token_to_id.get(token, self.unk_id)

    def sentencepiece_files(self):
        """`{"source.spm": ..., "target.spm": ...}`, the names of a Marian folder."""
        return {SOURCE_MODEL_FILE: self.source_proto, TARGET_MODEL_FILE: self.target_proto}

    def _tokenize_side(self, inputs, side):
        if isinstance(inputs, tf.Tensor) and inputs.dtype != tf.string:
            if inputs.shape.num_elements() != 0:
                raise TypeError(f"Expected text. Received a tensor of {inputs.dtype.name}")
            inputs = tf.zeros(inputs.shape, tf.string)  # an empty list converts to float64
        inputs = tf.convert_to_tensor(inputs, tf.string)
        unbatched = inputs.shape.rank == 0
        if unbatched:
            inputs = inputs[None]
        ids = self._ops.tokenize(inputs, side=side)
        return ids[0] if unbatched else ids

    @preprocessing_function
    def tokenize(self, inputs):
        """Source text -> joint ids (ragged for a batch), no end id appended."""
        return self._tokenize_side(inputs, "source")

    @preprocessing_function
    def tokenize_target(self, inputs):
        """Target text -> joint ids, as transformers' `text_target=` (no end id)."""
        return self._tokenize_side(inputs, "target")

    @preprocessing_function
    def detokenize(self, inputs):
        """Target joint ids -> text, special ids dropped."""
        inputs, unbatched, _ = convert_to_ragged_batch(inputs)
        texts = self._ops.detokenize(inputs)
        return texts[0] if unbatched else texts

    def get_config(self):
        config = super().get_config()
        for name in ("dtype", "config_file"):
            config.pop(name, None)
        config.update(
            {
                "source_proto": base64.b64encode(self.source_proto).decode("ascii"),
                "target_proto": base64.b64encode(self.target_proto).decode("ascii"),
                "vocabulary": list(self.vocabulary),
                **{name: getattr(self, name) for name in SPECIAL_ID_NAMES},
            }
        )
        return config
