"""Moses tokenization and subword-nmt BPE codes over fixed vocabularies (fairseq's WMT models)."""

import re

import keras
import numpy as np
from keras_hub.tokenizers import Tokenizer

from keras_transformer.text.translation_tokenizer import TranslationTokenizer

SPECIAL_ID_NAMES = ("pad_id", "unk_id", "bos_id", "eos_id")
_VERSION_LINE = re.compile(r"#version:\s*\S+")
EXPORT_REFUSAL = (
    "a model with a Moses + BPE tokenizer (MosesBpeTokenizer) cannot be exported as a "
    "SavedModel or for CTranslate2: Moses and subword-nmt run in Python; translate it with "
    "keras-transformer translate"
)


def check_bpe_codes(codes, name="bpe_codes"):
    """Raises ValueError unless `codes` is subword-nmt codes text: `LEFT RIGHT` per line.

    A first line `#version: X` is allowed. fastBPE's codes (`LEFT RIGHT
    COUNT`, fairseq's WMT19 models) are refused: fastBPE applies them by its
    own rules, which this tokenizer does not reproduce.
    """
    if not isinstance(codes, str):
        raise TypeError(f"`{name}` must be the text of a codes file. Received: {type(codes)}")
    lines = codes.rstrip("\n").split("\n")
    if lines and _VERSION_LINE.fullmatch(lines[0].strip()):
        lines = lines[1:]
    if not lines or lines == [""]:
        raise ValueError(f"`{name}` holds no merges")
    for number, line in enumerate(lines, start=1):
        fields = line.strip("\r\n ").split(" ")
        if len(fields) == 3 and fields[2].isdigit():
            raise ValueError(
                f"`{name}` line {number} is fastBPE's 'LEFT RIGHT COUNT'; only subword-nmt "
                f"codes ('LEFT RIGHT') are supported. Received: {line!r}"
            )
        if len(fields) != 2 or not all(fields):
            raise ValueError(
                f"`{name}` line {number}: expected two units separated by one space. "
                f"Received: {line!r}"
            )


def _texts(inputs):
    """str, bytes, lists of them, numpy arrays or string tensors -> (list of str, one?)."""
    if hasattr(inputs, "numpy"):
        inputs = inputs.numpy()
    if isinstance(inputs, np.ndarray):
        inputs = inputs.tolist()
    single = isinstance(inputs, (str, bytes))
    texts = [inputs] if single else list(inputs)
    return [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in texts], single


def _rows(ids):
    """Token ids (lists, arrays, tensors, ragged tensors) -> (list of lists of int, one?)."""
    if hasattr(ids, "to_list"):
        ids = ids.to_list()
    elif hasattr(ids, "numpy"):
        ids = ids.numpy()
    if isinstance(ids, np.ndarray):
        ids = ids.tolist()
    ids = list(ids)
    single = not ids or not isinstance(ids[0], (list, tuple, np.ndarray))
    rows = [ids] if single else ids
    return [[int(i) for i in row] for row in rows], single


@keras.saving.register_keras_serializable(package="keras_transformer")
class MosesBpeTokenizer(Tokenizer, TranslationTokenizer):
    """Moses tokenization, subword-nmt BPE and a vocabulary per side: fairseq's WMT pipeline.

    Source text is Moses-tokenized (sacremoses, with aggressive dash splits
    and escaping, as fairseq's `--tokenizer moses`), split into BPE units by
    subword-nmt's `BPE.process_line` with the given codes (fairseq's
    `--bpe subword_nmt`), and each unit mapped to its id in the source
    vocabulary, `unk_id` if absent. `detokenize` maps target ids to units,
    drops the padding, begin and end ids, joins them, removes the `@@ `
    separators and Moses-detokenizes. `<unk>` stays in the text, as fairseq
    prints it.

    Moses and subword-nmt run in Python, so the tokenizer serves the Python
    translation path (`Translator`, `keras-transformer translate`) but not an
    exported TensorFlow graph (`tf_trackable` raises).

    Args:
        bpe_codes: str, the text of a subword-nmt codes file.
        source_vocabulary: list of str, the unit of each source id.
        target_vocabulary: list of str, the unit of each target id; `None`
            means the source vocabulary (one shared dictionary).
        source_language, target_language: str, Moses' language codes.
        moses: bool. Moses-tokenize (and detokenize); `False` splits on
            whitespace only (fairseq's `--tokenizer space` or none).
        separator: str, the BPE continuation mark (`@@`).
        pad_id, unk_id, bos_id, eos_id: ints. `bos_id` is the decoder's
            first input (fairseq: the end id, 2).
        **kwargs: base layer arguments (`name`, ...).

    Example:

    >>> tokenizer = MosesBpeTokenizer(open("bpecodes").read(), symbols, source_language="en",
    ...     target_language="de", pad_id=1, unk_id=3, bos_id=2, eos_id=2)
    >>> tokenizer(["Hello world!"])          # [[...]] source ids, no end id
    >>> tokenizer.detokenize([[...]])        # target text
    """

    def __init__(
        self,
        bpe_codes,
        source_vocabulary,
        target_vocabulary=None,
        *,
        source_language="en",
        target_language="en",
        moses=True,
        separator="@@",
        pad_id,
        unk_id,
        bos_id,
        eos_id,
        **kwargs,
    ):
        kwargs.pop("dtype", None)  # always int ids
        super().__init__(dtype="int32", **kwargs)
        check_bpe_codes(bpe_codes)
        self.bpe_codes = bpe_codes
        self.source_vocabulary_list = self._check_vocabulary(source_vocabulary, "source")
        self.target_vocabulary_list = (
            self.source_vocabulary_list
            if target_vocabulary is None
            else self._check_vocabulary(target_vocabulary, "target")
        )
        self.shared_vocabulary = target_vocabulary is None
        self.source_language, self.target_language = source_language, target_language
        self.moses, self.separator = bool(moses), separator
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = pad_id, unk_id, bos_id, eos_id
        for name in SPECIAL_ID_NAMES:
            value = getattr(self, name)
            size = min(len(self.source_vocabulary_list), len(self.target_vocabulary_list))
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < size:
                raise ValueError(f"`{name}` must be an id below {size}. Received: {value!r}")
        self._source_ids = {unit: i for i, unit in enumerate(self.source_vocabulary_list)}
        self._target_ids = {unit: i for i, unit in enumerate(self.target_vocabulary_list)}
        self._dropped = {pad_id, bos_id, eos_id}
        self._bpe = self._moses_tokenizers = self._moses_detokenizer = None
        self.built = True

    @staticmethod
    def _check_vocabulary(vocabulary, side):
        if isinstance(vocabulary, str) or not all(isinstance(u, str) for u in vocabulary):
            raise TypeError(f"`{side}_vocabulary` must be a list of str, the unit of each id.")
        return list(vocabulary)

    def _segmenter(self):
        if self._bpe is None:
            import io

            try:
                from subword_nmt.apply_bpe import BPE
            except ImportError:
                raise ImportError(
                    "MosesBpeTokenizer needs subword-nmt: "
                    "pip install 'keras-transformer-mt[fairseq]'"
                ) from None
            self._bpe = BPE(io.StringIO(self.bpe_codes), separator=self.separator)
        return self._bpe

    def _moses_tokenize(self, text, language):
        if not self.moses:
            return text
        from sacremoses import MosesTokenizer

        if self._moses_tokenizers is None:
            self._moses_tokenizers = {}
        if language not in self._moses_tokenizers:
            self._moses_tokenizers[language] = MosesTokenizer(lang=language)
        return self._moses_tokenizers[language].tokenize(
            text, aggressive_dash_splits=True, return_str=True, escape=True
        )

    def _encode(self, inputs, language, ids):
        texts, single = _texts(inputs)
        bpe = self._segmenter()
        rows = []
        for text in texts:
            units = bpe.process_line(self._moses_tokenize(text, language)).split()
            rows.append([ids.get(unit, self.unk_id) for unit in units])
        return rows[0] if single else rows

    def __call__(self, inputs, *args, **kwargs):
        return self.tokenize(inputs)

    def call(self, inputs, *args, **kwargs):
        return self.tokenize(inputs)

    def tokenize(self, inputs):
        """Source text -> source ids (a list; lists for a batch), no end id."""
        return self._encode(inputs, self.source_language, self._source_ids)

    def tokenize_target(self, inputs):
        """Target text -> target ids, the same way with the target language."""
        return self._encode(inputs, self.target_language, self._target_ids)

    def detokenize(self, inputs):
        """Target ids -> text (a list of str; a str for one row)."""
        rows, single = _rows(inputs)
        texts = []
        for row in rows:
            units = [self.id_to_token(i) for i in row if i not in self._dropped]
            text = (" ".join(units) + " ").replace(self.separator + " ", "").rstrip()
            texts.append(self._moses_detokenize(text))
        return texts[0] if single else texts

    def _moses_detokenize(self, text):
        if not self.moses:
            return text
        if self._moses_detokenizer is None:
            from sacremoses import MosesDetokenizer

            self._moses_detokenizer = MosesDetokenizer(lang=self.target_language)
        return self._moses_detokenizer.detokenize(text.split())

    @property
    def tf_trackable(self):
        raise ValueError(EXPORT_REFUSAL)

    def sentencepiece_files(self):
        raise ValueError(EXPORT_REFUSAL)

    def vocabulary_size(self):
        return len(self.target_vocabulary_list)

    def get_vocabulary(self):
        return list(self.target_vocabulary_list)

    def source_vocabulary(self):
        return list(self.source_vocabulary_list)

    def target_vocabulary(self):
        return list(self.target_vocabulary_list)

    def id_to_token(self, id):
        if not 0 <= id < len(self.target_vocabulary_list):
            raise ValueError(
                f"`id` must be in range [0, {len(self.target_vocabulary_list) - 1}]. Received: {id}"
            )
        return self.target_vocabulary_list[id]

    def token_to_id(self, token):
        return self._target_ids.get(token, self.unk_id)

    def get_config(self):
        config = super().get_config()
        for name in ("dtype", "config_file"):
            config.pop(name, None)
        config.update(
            {
                "bpe_codes": self.bpe_codes,
                "source_vocabulary": list(self.source_vocabulary_list),
                "target_vocabulary": (
                    None if self.shared_vocabulary else list(self.target_vocabulary_list)
                ),
                "source_language": self.source_language,
                "target_language": self.target_language,
                "moses": self.moses,
                "separator": self.separator,
                **{name: getattr(self, name) for name in SPECIAL_ID_NAMES},
            }
        )
        return config
