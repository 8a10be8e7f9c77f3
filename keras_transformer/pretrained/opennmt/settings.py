"""An OpenNMT-py (v3) checkpoint's options as a `TransformerConfig`, and its vocabularies.

OpenNMT-py's `model_saver` writes `{"model": state dict, "generator": state dict, "vocab":
{"src": [pieces], "tgt": [pieces], "decoder_start_token": ...}, "opt": argparse.Namespace,
"optim": ...}`. Its Transformer differs from the paper's in ways that are `TransformerConfig`
options: pre-LN blocks with a final LayerNorm per stack, LayerNorm epsilon `norm_eps`
(1e-6), the sinusoid interleaved with the paper's frequencies or (`SinusoidalConcat`) as
sines then cosines with fairseq's, the generator's bias (`final_logits_bias`), biases on
the attention projections only with `add_qkvbias`.
"""

from keras_transformer.models.transformer_config import TransformerConfig
from keras_transformer.pretrained.torch_checkpoint import load_checkpoint, plain

EXPECTED_CONTENT = "an OpenNMT-py checkpoint (model, generator, vocab and opt)"
# OpenNMT-py's special tokens (onmt/constants.py's DefaultTokens).
PAD, BOS, EOS, UNK = "<blank>", "<s>", "</s>", "<unk>"
# Options a checkpoint may lack (older versions), with OpenNMT-py's defaults.
DEFAULTS = {
    "encoder_type": "rnn",
    "decoder_type": "rnn",
    "model_task": "seq2seq",
    "position_encoding": False,
    "position_encoding_type": "SinusoidalInterleaved",
    "max_relative_positions": 0,
    "self_attn_type": "scaled-dot",
    "pos_ffn_activation_fn": "relu",
    "layer_norm": "standard",
    "norm_eps": 1e-6,
    "share_embeddings": False,
    "share_decoder_embeddings": False,
    "dropout": 0.1,
    "attention_dropout": 0.1,
}
# Options whose other values this package's model cannot compute: name -> (the value that
# means "not used", what another value is).
UNSUPPORTED = {
    "model_task": ("seq2seq", "a task other than translation (seq2seq)"),
    "max_relative_positions": (0, "relative, rotary or ALiBi positions"),
    "layer_norm": ("standard", "RMSNorm"),
    "copy_attn": (False, "a copy generator"),
    "num_kv": (0, "grouped key/value heads"),
    "parallel_residual": (False, "parallel residual blocks"),
    "num_experts": (0, "a mixture of experts"),
    "lora_layers": ([], "LoRA layers (saved apart from the model)"),
    "quant_layers": ([], "quantized layers"),
}
POSITIONS = {
    "SinusoidalInterleaved": {"position_layout": "interleaved", "position_frequencies": "paper"},
    "SinusoidalConcat": {"position_layout": "halves", "position_frequencies": "fairseq"},
}
ACTIVATIONS = ("relu", "gelu")
SELF_ATTENTIONS = ("scaled-dot", "scaled-dot-flash")


class OpenNMTImportError(ValueError):
    """A checkpoint this package cannot read or represent; the message is one line."""


def read_checkpoint(path):
    """The checkpoint dict of an OpenNMT-py `.pt` file, checked to be one.

    Raises:
        ImportError: torch is not installed.
        ValueError: not a torch file, or not an OpenNMT-py checkpoint.
    """
    from keras_transformer.pretrained.torch_checkpoint import import_torch

    torch = import_torch(
        "reading an OpenNMT-py checkpoint needs PyTorch: pip install 'keras-transformer-mt[torch]'"
    )
    checkpoint = load_checkpoint(path, EXPECTED_CONTENT, torch)
    keys = ("model", "generator", "vocab", "opt")
    if isinstance(checkpoint, dict) and "opt" in checkpoint and checkpoint.get("model") is None:
        raise OpenNMTImportError(
            f"{path}: holds no weights (OpenNMT-py's safetensors mode saves them apart, which "
            "is not supported); expected a checkpoint saved with its model"
        )
    if not isinstance(checkpoint, dict) or any(key not in checkpoint for key in keys):
        found = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise OpenNMTImportError(
            f"{path}: not an OpenNMT-py checkpoint (expected the keys {', '.join(keys)}; "
            f"found {found})"
        )
    vocab = checkpoint["vocab"]
    if not isinstance(vocab, dict) or not all(_pieces(vocab.get(side)) for side in ("src", "tgt")):
        raise OpenNMTImportError(
            f"{path}: its vocab is not OpenNMT-py v3's (lists of tokens for src and tgt); "
            "convert an OpenNMT-py v2 model with v3's tools/convertv2_v3.py first"
        )
    return checkpoint


def _pieces(value):
    return isinstance(value, list) and value and all(isinstance(item, str) for item in value)


def read_settings(checkpoint, path):
    """The checkpoint's options as a dict, OpenNMT-py's defaults filled in."""
    opt = plain(checkpoint["opt"])
    if not isinstance(opt, dict):
        raise OpenNMTImportError(f"{path}: its opt is not the training options")
    settings = {**DEFAULTS, **{key: value for key, value in opt.items() if value is not None}}
    for name in ("dropout", "attention_dropout"):
        if isinstance(settings[name], list | tuple):
            settings[name] = settings[name][0] if settings[name] else 0.0
    return settings


def special_ids(vocab, side, path):
    """`{"pad_id", "unk_id", "bos_id", "eos_id"}` of one side's vocabulary."""
    pieces = vocab[side]
    start = vocab.get("decoder_start_token") or BOS
    ids = {}
    for name, piece in (("pad_id", PAD), ("unk_id", UNK), ("bos_id", start), ("eos_id", EOS)):
        if piece not in pieces:
            raise OpenNMTImportError(f"{path}: the {side} vocabulary has no {piece!r}")
        ids[name] = pieces.index(piece)
    return ids


def _check_supported(s, path):
    for stack in ("encoder", "decoder"):
        if s[f"{stack}_type"] != "transformer":
            raise OpenNMTImportError(
                f"{path}: {stack}_type={s[f'{stack}_type']!r}; only OpenNMT-py's Transformer "
                "(encoder_type and decoder_type 'transformer') is imported"
            )
    for name, (unused, what) in UNSUPPORTED.items():
        value = s.get(name, unused)
        if value != unused and value not in (None, 0, False, []):
            raise OpenNMTImportError(f"{path}: {name}={value!r} ({what}) is not supported")
    if s["self_attn_type"] not in SELF_ATTENTIONS:
        raise OpenNMTImportError(
            f"{path}: self_attn_type={s['self_attn_type']!r} is not supported (only "
            f"{', '.join(SELF_ATTENTIONS)})"
        )
    if not s["position_encoding"] or s["position_encoding_type"] not in POSITIONS:
        raise OpenNMTImportError(
            f"{path}: position_encoding={s['position_encoding']!r}, position_encoding_type="
            f"{s['position_encoding_type']!r}: only the sinusoid ({', '.join(POSITIONS)}) is "
            "supported"
        )
    if s["pos_ffn_activation_fn"] not in ACTIVATIONS:
        raise OpenNMTImportError(
            f"{path}: pos_ffn_activation_fn={s['pos_ffn_activation_fn']!r} is not supported "
            f"(one of {', '.join(ACTIVATIONS)})"
        )
    if s.get("enc_layers", 0) != s.get("dec_layers", 0):
        raise OpenNMTImportError(
            f"{path}: enc_layers={s.get('enc_layers')} and dec_layers={s.get('dec_layers')} "
            "differ; this package's models have one value for both"
        )


def transformer_config(settings, shapes, vocabulary_size, pad_id, path):
    """The `TransformerConfig` of an OpenNMT-py Transformer.

    Args:
        settings: `read_settings`'s dict.
        shapes: dict with `d_model`, `intermediate_dim`, `attention_bias`,
            `logits_bias`, `separate_source` read from the tensors.
        vocabulary_size: int, the ids of the (joint) vocabulary.
        pad_id: int, the padding id.
        path: the checkpoint's name, for messages.

    Raises:
        OpenNMTImportError: an option the model cannot represent; one line.
    """
    s = settings
    _check_supported(s, path)
    try:
        return TransformerConfig(
            vocabulary_size=vocabulary_size,
            share_embeddings=not shapes["separate_source"],
            tie_output_projection=bool(s["share_decoder_embeddings"]),
            num_layers=int(s["enc_layers"]),
            d_model=shapes["d_model"],
            num_heads=int(s["heads"]),
            intermediate_dim=shapes["intermediate_dim"],
            dropout=float(s["dropout"]),
            attention_dropout=float(s["attention_dropout"]),
            activation_dropout=float(s["dropout"]),
            activation=s["pos_ffn_activation_fn"],
            attention_bias=shapes["attention_bias"],
            final_logits_bias=shapes["logits_bias"],
            normalize_first=True,
            layer_norm_epsilon=float(s["norm_eps"]),
            scale_embeddings=True,
            position_offset=0,
            pad_id=pad_id,
            source_eos=False,  # OpenNMT-py's sources carry no end id
            **POSITIONS[s["position_encoding_type"]],
        )
    except (KeyError, TypeError, ValueError) as error:
        raise OpenNMTImportError(f"{path}: the options give no valid model: {error}") from None
