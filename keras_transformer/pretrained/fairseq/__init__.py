"""The fairseq format: a fairseq `transformer` checkpoint as a translation model.

Its parts: checkpoint.py reads the checkpoint's settings, settings.py turns them into a
`TransformerConfig`, names.py maps its tensors onto the model's weights, dictionary.py and
tokenizer.py read `dict.LANG.txt` and the subword model.
"""

import glob
import os

from keras_transformer.pretrained.fairseq.checkpoint import checkpoint_settings, load_checkpoint
from keras_transformer.pretrained.fairseq.names import assign_fairseq_weights
from keras_transformer.pretrained.fairseq.settings import (
    FairseqImportError,
    complete_settings,
    transformer_config,
)
from keras_transformer.pretrained.fairseq.tokenizer import (
    build_tokenizer,
    dictionary,
    languages,
    segmentation_file,
)

NAME = "fairseq"
# Any `.pt` file that no other format recognizes is taken as a fairseq checkpoint.
FALLBACK = True
FOLDER_HINT = "a fairseq checkpoint folder (model.pt, dict.SRC.txt, dict.TGT.txt)"
MISSING_HINT = "a fairseq checkpoint folder (no *.pt)"


def accepts_file(path):
    """Whether a file given as a model is this format's: a `.pt` checkpoint."""
    return os.fspath(path).endswith(".pt")


def find_in_folder(name, folder):
    """The checkpoint of a fairseq folder (a `.pt` beside `dict.*.txt`), or None.

    Raises:
        ValueError: several checkpoints in it.
    """
    checkpoints = sorted(glob.glob(os.path.join(glob.escape(folder), "*.pt")))
    if checkpoints and glob.glob(os.path.join(glob.escape(folder), "dict.*.txt")):
        if len(checkpoints) > 1:
            names = ", ".join(os.path.basename(path) for path in checkpoints)
            raise ValueError(f"{name}: several fairseq checkpoints ({names}); name one")
        return checkpoints[0]
    return None


def translation_model(path):
    """`(model, tokenizer)` of a checkpoint whose folder holds its dictionaries."""
    return fairseq_translation_model(path, os.path.dirname(path) or ".")


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
    langs = languages(task, source_lang, target_lang)
    segmentation = segmentation_file(dictionary_dir, bpe_codes, sentencepiece_model, task)
    state = checkpoint["model"]
    rows = {}
    for stack in ("encoder", "decoder"):
        weights = state.get(f"{stack}.embed_tokens.weight")
        if weights is None:
            raise FairseqImportError(f"the state dict has no '{stack}.embed_tokens.weight'")
        rows[stack] = int(weights.shape[0])
    source_symbols = dictionary(dictionary_dir, langs[0], rows["encoder"])
    target_symbols = dictionary(dictionary_dir, langs[1], rows["decoder"])
    if settings["share_all_embeddings"] and source_symbols != target_symbols:
        raise FairseqImportError(
            f"share_all_embeddings is set but dict.{langs[0]}.txt and "
            f"dict.{langs[1]}.txt differ (fairseq needs one joint dictionary)"
        )
    position_rows = tuple(
        int(state[f"{stack}.embed_positions.weight"].shape[0])
        for stack in ("encoder", "decoder")
        if f"{stack}.embed_positions.weight" in state
    )
    config = transformer_config(
        settings, rows["encoder"], rows["decoder"], position_rows if position_rows else None
    )
    tokenizer = build_tokenizer(segmentation, source_symbols, target_symbols, task, langs, moses)
    model = Seq2SeqTransformer(config)
    model.build()
    assign_fairseq_weights(model, state, checkpoint_path)
    return model, tokenizer
