"""`import_fairseq`: a fairseq `transformer` checkpoint as a translation model file."""

import os

from keras_transformer.pretrained.fairseq_checkpoint import checkpoint_settings, load_checkpoint
from keras_transformer.pretrained.fairseq_dictionary import (
    EOS_ID,
    PAD_ID,
    UNK_ID,
    padded_symbols,
    read_fairseq_dictionary,
)
from keras_transformer.pretrained.fairseq_model import (
    FairseqImportError,
    complete_settings,
    transformer_config,
)
from keras_transformer.pretrained.fairseq_weights import assign_fairseq_weights
from keras_transformer.text.sentencepiece_file import read_sentencepiece_model

# Files of fairseq's published archives (and `fairseq-preprocess` folders) looked for in the
# dictionary folder when no codes or model is named.
BPE_CODES_FILES = ("bpecodes", "code", "codes")
SENTENCEPIECE_FILES = ("sentencepiece.bpe.model", "spm.model", "sentencepiece.model")
SUPPORTED_BPE = ("subword_nmt", "sentencepiece")
# fairseq decodes from the end id: the decoder's first input is </s>.
SPECIAL_IDS = {"pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": EOS_ID, "eos_id": EOS_ID}


def _languages(task, source_lang, target_lang):
    source = source_lang or task.get("source_lang")
    target = target_lang or task.get("target_lang")
    if not source or not target:
        raise FairseqImportError(
            "the checkpoint names no source and target language (its dict.LANG.txt files): "
            "pass source_lang and target_lang (--source-lang, --target-lang)"
        )
    return str(source), str(target)


def _dictionary(dictionary_dir, language, rows):
    path = os.path.join(dictionary_dir, f"dict.{language}.txt")
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "No such dictionary file", path)
    symbols = read_fairseq_dictionary(path)  # errors name the file and line
    try:
        return padded_symbols(symbols, rows)
    except ValueError as error:
        raise FairseqImportError(f"{path}: {error}") from None


def _segmentation_file(dictionary_dir, bpe_codes, sentencepiece_model, task):
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
        segmentation: `(kind, path)` from `_segmentation_file`.
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


def import_fairseq(
    checkpoint_path,
    dictionary_dir,
    output_path,
    *,
    source_lang=None,
    target_lang=None,
    bpe_codes=None,
    sentencepiece_model=None,
    moses=None,
):
    """Writes a fairseq `transformer` checkpoint as a `save_translation_model` file.

    Reads the checkpoint (`args` or `cfg`, and the state dict) with torch,
    without fairseq; the dictionaries `dict.SRC.txt` and `dict.TGT.txt` from
    `dictionary_dir`; and the subword model: subword-nmt BPE codes (applied
    after Moses tokenization, as fairseq's WMT models) or a SentencePiece
    model. The model computes fairseq's logits: post-LN (or pre-LN) blocks
    with biases, fairseq's sinusoid (sines then cosines, its frequencies,
    positions from `pad + 1`) or learned positions, LayerNorm epsilon 1e-5,
    and its ids (`<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3; decoding starts
    from `</s>`).

    Args:
        checkpoint_path: a fairseq checkpoint (`model.pt`, `checkpoint_best.pt`).
        dictionary_dir: the folder of `dict.SRC.txt` and `dict.TGT.txt`
            (and of `bpecodes` or `sentencepiece.bpe.model`, when not named).
        output_path: the `.keras` file to write (atomically).
        source_lang, target_lang: language codes; default: the checkpoint's.
        bpe_codes: path of subword-nmt codes.
        sentencepiece_model: path of a SentencePiece model.
        moses: bool or None. Moses-tokenize before BPE; `None`: yes unless
            the checkpoint says `--tokenizer space`.

    Returns:
        `(model, tokenizer)`, as written to `output_path`.

    Raises:
        FairseqImportError: an architecture or option the model cannot
            represent, or files that disagree; one line.
        OSError: a file cannot be read or written.
        ImportError: torch (or subword-nmt) is missing.

    Example:

    >>> import_fairseq("wmt16.en-de/model.pt", "wmt16.en-de", "wmt16-en-de.keras")
    """
    from keras_transformer.export.save_translation_model import save_translation_model

    if not str(output_path).endswith(".keras"):
        raise FairseqImportError(f"the output must be a .keras file. Received: {output_path}")
    model, tokenizer = fairseq_translation_model(
        checkpoint_path,
        dictionary_dir,
        source_lang=source_lang,
        target_lang=target_lang,
        bpe_codes=bpe_codes,
        sentencepiece_model=sentencepiece_model,
        moses=moses,
    )
    save_translation_model(model, tokenizer, output_path)
    return model, tokenizer


def fairseq_translation_model(
    checkpoint_path,
    dictionary_dir,
    *,
    source_lang=None,
    target_lang=None,
    bpe_codes=None,
    sentencepiece_model=None,
    moses=None,
):
    """The model and tokenizer of a fairseq checkpoint, in memory (nothing written).

    Args:
        checkpoint_path, dictionary_dir, source_lang, target_lang, bpe_codes,
            sentencepiece_model, moses: as `import_fairseq`.

    Returns:
        `(model, tokenizer)`, as `import_fairseq` writes them.

    Raises:
        FairseqImportError, OSError, ImportError: as `import_fairseq`.

    Example:

    >>> model, tokenizer = fairseq_translation_model("wmt16.en-de/model.pt", "wmt16.en-de")
    """
    from keras_transformer.models.seq2seq_transformer import Seq2SeqTransformer

    checkpoint_path, dictionary_dir = os.fspath(checkpoint_path), os.fspath(dictionary_dir)
    for path in (checkpoint_path, dictionary_dir):
        if not os.path.exists(path):
            raise FileNotFoundError(2, "No such file or directory", path)
    checkpoint = load_checkpoint(checkpoint_path)
    model_settings, task = checkpoint_settings(checkpoint, checkpoint_path)
    settings = complete_settings(model_settings)
    languages = _languages(task, source_lang, target_lang)
    segmentation = _segmentation_file(dictionary_dir, bpe_codes, sentencepiece_model, task)
    state = checkpoint["model"]
    rows = {}
    for stack in ("encoder", "decoder"):
        weights = state.get(f"{stack}.embed_tokens.weight")
        if weights is None:
            raise FairseqImportError(f"the state dict has no '{stack}.embed_tokens.weight'")
        rows[stack] = int(weights.shape[0])
    source_symbols = _dictionary(dictionary_dir, languages[0], rows["encoder"])
    target_symbols = _dictionary(dictionary_dir, languages[1], rows["decoder"])
    if settings["share_all_embeddings"] and source_symbols != target_symbols:
        raise FairseqImportError(
            f"share_all_embeddings is set but dict.{languages[0]}.txt and "
            f"dict.{languages[1]}.txt differ (fairseq needs one joint dictionary)"
        )
    position_rows = tuple(
        int(state[f"{stack}.embed_positions.weight"].shape[0])
        for stack in ("encoder", "decoder")
        if f"{stack}.embed_positions.weight" in state
    )
    config = transformer_config(
        settings, rows["encoder"], rows["decoder"], position_rows if position_rows else None
    )
    tokenizer = build_tokenizer(
        segmentation, source_symbols, target_symbols, task, languages, moses
    )
    model = Seq2SeqTransformer(config)
    model.build()
    assign_fairseq_weights(model, state, checkpoint_path)
    return model, tokenizer
