"""The shared source/target subword tokenizer: keras-hub's SentencePiece layer with fixed ids."""

import base64
import binascii
import hashlib
import os

import keras
import tensorflow as tf
from keras_hub.tokenizers import SentencePieceTokenizer

from keras_transformer import compat
from keras_transformer.text.sentencepiece_ids import (  # noqa: F401 (exported names)
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIAL_IDS,
    UNK_ID,
    check_special_ids,
)
from keras_transformer.text.text_files import write_bytes_atomic
from keras_transformer.text.translation_tokenizer import TranslationTokenizer

# The pieces of the special ids (PAD_ID..EOS_ID, from `sentencepiece_ids`, which needs no
# backend: the commands check a --vocabulary file before TensorFlow loads).
PAD_PIECE = "<pad>"
UNK_PIECE = "<unk>"
BOS_PIECE = "<s>"
EOS_PIECE = "</s>"
# The file name of the model in exports (`sentencepiece_files`).
MODEL_FILE = "vocabulary.model"
# Even a tiny SentencePiece model serializes to tens of kilobytes (the
# normalization table alone); keras-hub uses the same threshold.
MIN_BASE64_LENGTH = 2048


def _in_safe_mode():
    # keras-hub guards file paths in deserialized configs the same way.
    return compat.in_safe_mode()


def proto_to_bytes(proto):
    """Returns the serialized SentencePiece model held or named by `proto`.

    Args:
        proto: bytes (a serialized model), a path (str or `os.PathLike`) to a
            `.model` file, or the base64 text that `get_config` writes.
    """
    if isinstance(proto, bytes):
        return proto
    if isinstance(proto, os.PathLike) or (isinstance(proto, str) and os.path.isfile(proto)):
        if _in_safe_mode():
            raise ValueError(
                "Loading a SentencePiece model from a file path named in a config is "
                "disallowed in safe mode. If you trust the source, pass `safe_mode=False`. "
                f"Received: proto={os.fspath(proto)!r}"
            )
        with open(proto, "rb") as file:
            return file.read()
    if isinstance(proto, str):
        try:
            # A serialized model is far longer than any path; short text is a missing file.
            if len(proto) > MIN_BASE64_LENGTH:
                return base64.b64decode(proto, validate=True)
        except (binascii.Error, ValueError):
            pass
        raise FileNotFoundError(
            "`proto` is neither an existing SentencePiece model file nor base64 model "
            f"bytes. Received: proto={proto[:200]!r}"
        )
    raise TypeError(
        "`proto` must be bytes, a path to a SentencePiece model, or base64 text. "
        f"Received: proto of type {type(proto).__name__}"
    )


class _SharedSentencepieceResource(tf.saved_model.experimental.TrackableResource):
    """tensorflow-text's SentencePiece model resource, registered under a shared name.

    tensorflow-text creates the resource unnamed, owned by the eager kernel
    that made it. `tf.random.set_seed` (so `keras.utils.set_random_seed`)
    clears the eager kernel cache, which deletes such a resource: every later
    use in `tf.data` fails with "Resource ... SentencepieceOp does not exist".
    A shared name (one per model) keeps the resource in the resource manager.
    """

    def __init__(self, model):
        super().__init__()
        self._model = model
        self._shared_name = "keras_transformer_sentencepiece_" + hashlib.sha256(model).hexdigest()
        _ = self.resource_handle  # creates the resource now, outside any tf.data function

    def _create_resource(self):
        return compat.sentencepiece_resource_op(self._model, self._shared_name)


@keras.saving.register_keras_serializable(package="keras_transformer")
class SubwordTokenizer(SentencePieceTokenizer, TranslationTokenizer):
    """SentencePiece tokenizer shared by source and target, with fixed special ids.

    A keras-hub `SentencePieceTokenizer` (tensorflow-text ops, so it runs
    inside `tf.data` and in an exported TensorFlow graph) whose model must use
    the ids the rest of the package relies on:

    | id | piece   | meaning                                                 |
    |----|---------|---------------------------------------------------------|
    | 0  | `<pad>` | padding; masked in attention and ignored by the loss    |
    | 1  | `<unk>` | unknown piece (only without byte fallback)              |
    | 2  | `<s>`   | begin: first decoder input token                        |
    | 3  | `</s>`  | end: last label token, and appended to every source     |

    Tokenizing returns pieces without begin/end ids unless `add_bos` or
    `add_eos` is set; the input pipeline adds them itself. The config stores
    the model as base64 text, so `from_config(get_config())` rebuilds the
    tokenizer without any file.

    Args:
        proto: bytes of a serialized SentencePiece model, a path to a
            `.model` file, or the base64 text from `get_config`.
        sequence_length: int or None. If set, outputs are dense, padded with
            `PAD_ID` or truncated to this length.
        dtype: output dtype, `"int32"` (default) or a string dtype for pieces.
        add_bos: bool. Prepend `BOS_ID`.
        add_eos: bool. Append `EOS_ID`.
        **kwargs: base layer arguments (`name`, ...).

    Call arguments:
        inputs: str, list of str, or a string tensor of rank 0 or 1.

    Returns:
        Token ids: a `tf.RaggedTensor` (or nested lists outside TensorFlow
        functions) for batched inputs without `sequence_length`, a dense
        tensor otherwise.

    Example:

    >>> tokenizer = train_vocabulary(sentences, vocabulary_size=8000)
    >>> ids = tokenizer(["Ein Hund rennt."])          # [[..]] piece ids
    >>> tokenizer.detokenize(ids)                     # ['Ein Hund rennt.']
    >>> dataset = dataset.map(tokenizer)              # inside tf.data
    """

    pad_id = PAD_ID
    unk_id = UNK_ID
    bos_id = BOS_ID
    eos_id = EOS_ID

    def __init__(
        self,
        proto=None,
        sequence_length=None,
        dtype="int32",
        add_bos=False,
        add_eos=False,
        **kwargs,
    ):
        # keras-hub conventions (samplers, packers) read these attribute names.
        self._add_special_token(PAD_PIECE, "pad_token")
        self._add_special_token(BOS_PIECE, "start_token")
        self._add_special_token(EOS_PIECE, "end_token")
        super().__init__(
            proto=proto,
            sequence_length=sequence_length,
            dtype=dtype,
            add_bos=add_bos,
            add_eos=add_eos,
            **kwargs,
        )
        # Nothing to build; export tools refuse unbuilt layers.
        self.built = True

    def _set_proto_tf(self, proto):
        super()._set_proto_tf(proto)
        compat.share_sentencepiece_resource(
            self._sentence_piece, _SharedSentencepieceResource(proto)
        )

    def set_proto(self, proto):
        if proto is None:
            super().set_proto(None)
            return
        proto_bytes = proto_to_bytes(proto)
        check_special_ids(proto_bytes)
        super().set_proto(proto_bytes)

    @property
    def tf_trackable(self):
        """The tensorflow-text tokenizer (a `tf.Module`) owning the SentencePiece resource.

        With the TensorFlow backend a Keras layer is itself TF-trackable. With
        other backends, attach this object to the `tf.Module` you save (or
        `ExportArchive.track` it) so the resource is exported.
        """
        self._check_vocabulary()
        self._maybe_initialized_tf()
        return self._sentence_piece

    @property
    def has_vocabulary(self):
        return self.proto is not None

    def sentencepiece_files(self):
        """`{"vocabulary.model": the SentencePiece model}`: what an export ships."""
        self._check_vocabulary()
        return {MODEL_FILE: self.proto}

    def save_to_file(self, path):
        """Writes the SentencePiece model to `path` atomically (temp file + rename)."""
        self._check_vocabulary()
        write_bytes_atomic(path, self.proto)

    def get_config(self):
        config = super().get_config()
        config["proto"] = (
            None if self.proto is None else base64.b64encode(self.proto).decode("ascii")
        )
        return config
