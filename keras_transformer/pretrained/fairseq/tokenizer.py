"""The tokenizer of an imported fairseq model: its dictionaries and its subword model."""

import os

from keras_transformer.pretrained.fairseq.dictionary import (
    EOS_ID,
    PAD_ID,
    UNK_ID,
    padded_symbols,
    read_fairseq_dictionary,
)
from keras_transformer.pretrained.fairseq.settings import FairseqImportError
from keras_transformer.text.sentencepiece_file import read_sentencepiece_model

# Files of fairseq's published archives (and `fairseq-preprocess` folders) looked for in the
# dictionary folder when no codes or model is named.
BPE_CODES_FILES = ("bpecodes", "code", "codes")
SENTENCEPIECE_FILES = ("sentencepiece.bpe.model", "spm.model", "sentencepiece.model")
SUPPORTED_BPE = ("subword_nmt", "sentencepiece")
# fairseq decodes from the end id: the decoder's first input is </s>.
SPECIAL_IDS = {"pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": EOS_ID, "eos_id": EOS_ID}


def languages(task, source_lang, target_lang):
    source = source_lang or task.get("source_lang")
    target = target_lang or task.get("target_lang")
    if not source or not target:
        raise FairseqImportError(
            "the checkpoint names no source and target language (its dict.LANG.txt files): "
            "pass source_lang and target_lang (--source-lang, --target-lang)"
        )
    return str(source), str(target)


def dictionary(dictionary_dir, language, rows):
    path = os.path.join(dictionary_dir, f"dict.{language}.txt")
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "No such dictionary file", path)
    symbols = read_fairseq_dictionary(path)  # errors name the file and line
    try:
        return padded_symbols(symbols, rows)
    except ValueError as error:
        raise FairseqImportError(f"{path}: {error}") from None


def segmentation_file(dictionary_dir, bpe_codes, sentencepiece_model, task):
    """("bpe_codes" | "sentencepiece", path) of the subword model to use."""
    if bpe_codes and sentencepiece_model:
        raise FairseqImportError("give BPE codes or a SentencePiece model, not both")
    if bpe_codes or sentencepiece_model:
        kind = "bpe_codes" if bpe_codes else "sentencepiece"
        path = bpe_codes or sentencepiece_model
        if not os.path.isfile(path):
            raise FileNotFoundError(2, "No such file", os.fspath(path))
        return kind, os.fspath(path)
    bpe = task.get("bpe")
    if bpe is not None and str(bpe) not in SUPPORTED_BPE:
        raise FairseqImportError(
            f"the checkpoint's subword model is bpe={bpe!r}; supported: {', '.join(SUPPORTED_BPE)}"
        )
    candidates = {
        "bpe_codes": (os.path.basename(str(task.get("bpe_codes") or "")), *BPE_CODES_FILES),
        "sentencepiece": (
            os.path.basename(str(task.get("sentencepiece_model") or "")),
            *SENTENCEPIECE_FILES,
        ),
    }
    # The kind the checkpoint names, or either (codes first) when it names none.
    kinds = {"subword_nmt": ("bpe_codes",), "sentencepiece": ("sentencepiece",)}.get(
        str(bpe), ("bpe_codes", "sentencepiece")
    )
    for kind in kinds:
        for name in filter(None, candidates[kind]):
            path = os.path.join(dictionary_dir, name)
            if os.path.isfile(path):
                return kind, path
    raise FairseqImportError(
        f"no BPE codes ({', '.join(BPE_CODES_FILES)}) or SentencePiece model "
        f"({', '.join(SENTENCEPIECE_FILES)}) in {dictionary_dir} for the checkpoint's "
        f"bpe={bpe!r}: name one (--bpe-codes, --sentencepiece-model)"
    )


def _moses_languages(task, source, target):
    return (
        str(task.get("moses_source_lang") or source),
        str(task.get("moses_target_lang") or target),
    )


def build_tokenizer(segmentation, source_symbols, target_symbols, task, languages, moses):
    """The tokenizer of an imported model: Moses + BPE codes, or SentencePiece.

    Args:
        segmentation: `(kind, path)` from `segmentation_file`.
        source_symbols, target_symbols: lists of str, the dictionaries.
        task: the checkpoint's task settings (Moses' languages).
        languages: `(source, target)` language codes.
        moses: bool or None. Moses-tokenize; `None`: unless the checkpoint
            says `tokenizer=space`.
    """
    kind, path = segmentation
    shared = source_symbols == target_symbols
    if kind == "sentencepiece":
        from keras_transformer.text.joint_vocabulary_tokenizer import JointVocabularyTokenizer

        if not shared:
            raise FairseqImportError(
                "a SentencePiece model with separate source and target dictionaries is not "
                "supported (one joint dictionary is)"
            )
        if moses or (moses is None and str(task.get("tokenizer")) == "moses"):
            raise FairseqImportError(
                "Moses tokenization before SentencePiece is not supported (the checkpoint's "
                "tokenizer=moses; --tokenizer space skips it)"
            )
        proto = read_sentencepiece_model(path, "the SentencePiece model of the checkpoint")
        try:
            return JointVocabularyTokenizer(proto, proto, source_symbols, **SPECIAL_IDS)
        except ValueError as error:
            raise FairseqImportError(f"{path}: {error}") from None
    from keras_transformer.text.moses_bpe_tokenizer import MosesBpeTokenizer

    if moses is None:
        moses = str(task.get("tokenizer")) != "space"
    try:
        with open(path, encoding="utf-8") as file:
            codes = file.read()
    except UnicodeDecodeError as error:
        raise FairseqImportError(
            f"{path}: not UTF-8 text (byte {error.start}); expected subword-nmt BPE codes, "
            "one 'LEFT RIGHT' merge per line"
        ) from None
    source_language, target_language = _moses_languages(task, *languages)
    try:
        return MosesBpeTokenizer(
            codes,
            source_symbols,
            None if shared else target_symbols,
            source_language=source_language,
            target_language=target_language,
            moses=moses,
            separator=str(task.get("bpe_separator") or "@@"),
            **SPECIAL_IDS,
        )
    except ValueError as error:
        raise FairseqImportError(f"{path}: {error}") from None
