"""fairseq `transformer` settings and state dicts as a `TransformerConfig` and Keras weights."""

from keras_transformer.models.transformer_config import TransformerConfig
from keras_transformer.pretrained.fairseq.dictionary import PAD_ID

# fairseq's base_architecture (transformer_legacy.py) for settings an older checkpoint lacks.
BASE_SETTINGS = {
    "encoder_embed_dim": 512,
    "encoder_ffn_embed_dim": 2048,
    "encoder_layers": 6,
    "encoder_attention_heads": 8,
    "encoder_normalize_before": False,
    "encoder_learned_pos": False,
    "decoder_layers": 6,
    "decoder_attention_heads": 8,
    "decoder_normalize_before": False,
    "decoder_learned_pos": False,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "activation_fn": "relu",
    "dropout": 0.1,
    "adaptive_softmax_cutoff": None,
    "share_decoder_input_output_embed": False,
    "share_all_embeddings": False,
    "no_token_positional_embeddings": False,
    "adaptive_input": False,
    "no_cross_attention": False,
    "cross_self_attention": False,
    "no_scale_embedding": False,
    "layernorm_embedding": False,
    "no_decoder_final_norm": False,
    "max_source_positions": 1024,
    "max_target_positions": 1024,
}
_BIG = {
    "encoder_embed_dim": 1024,
    "encoder_ffn_embed_dim": 4096,
    "encoder_attention_heads": 16,
    "decoder_embed_dim": 1024,
    "decoder_ffn_embed_dim": 4096,
    "decoder_attention_heads": 16,
    "dropout": 0.3,
}
# The architectures of fairseq's `transformer` model with the paper's layout, and what each
# sets before base_architecture fills in the rest.
ARCHITECTURES = {
    "transformer": {},
    "transformer_wmt_en_de": {},
    "transformer_vaswani_wmt_en_de_big": _BIG,
    "transformer_vaswani_wmt_en_fr_big": {**_BIG, "dropout": 0.1},
    "transformer_wmt_en_de_big": {**_BIG, "attention_dropout": 0.1},
    "transformer_wmt_en_de_big_t2t": {
        **_BIG,
        "encoder_normalize_before": True,
        "decoder_normalize_before": True,
        "attention_dropout": 0.1,
        "activation_dropout": 0.1,
    },
    "transformer_iwslt_de_en": {
        "encoder_ffn_embed_dim": 1024,
        "encoder_attention_heads": 4,
        "decoder_ffn_embed_dim": 1024,
        "decoder_attention_heads": 4,
    },
}
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish"}
# Settings our model has no counterpart for, and the value that means "not used".
_UNSUPPORTED = {
    "no_token_positional_embeddings": (False, "no positions"),
    "layernorm_embedding": (False, "a LayerNorm on the embeddings"),
    "adaptive_softmax_cutoff": (None, "an adaptive softmax"),
    "adaptive_input": (False, "adaptive inputs"),
    "no_cross_attention": (False, "a decoder without encoder attention"),
    "cross_self_attention": (False, "cross+self attention"),
    "no_decoder_final_norm": (False, "no final decoder LayerNorm"),
}


class FairseqImportError(ValueError):
    """A checkpoint this package cannot represent, or inconsistent with its dictionaries."""


def complete_settings(settings):
    """`settings` with fairseq's defaults of its architecture for the missing ones.

    Raises:
        FairseqImportError: the architecture is not one of `ARCHITECTURES`.
    """
    arch = settings.get("arch")
    if arch not in ARCHITECTURES:
        raise FairseqImportError(
            f"architecture {arch!r} is not supported; supported: {', '.join(ARCHITECTURES)}"
        )
    settings = {key: value for key, value in settings.items() if value is not None}
    if "relu_dropout" in settings:  # fairseq < 0.7's name of activation_dropout
        settings.setdefault("activation_dropout", settings["relu_dropout"])
    for key, value in {**BASE_SETTINGS, **ARCHITECTURES[arch]}.items():
        settings.setdefault(key, value)
    settings.setdefault("decoder_embed_dim", settings["encoder_embed_dim"])
    settings.setdefault("decoder_ffn_embed_dim", settings["encoder_ffn_embed_dim"])
    settings.setdefault("decoder_output_dim", settings["decoder_embed_dim"])
    settings.setdefault("decoder_input_dim", settings["decoder_embed_dim"])
    if settings["share_all_embeddings"]:
        settings["share_decoder_input_output_embed"] = True  # as fairseq's build_model does
    return settings


def _check_supported(s):
    for key, (unused, what) in _UNSUPPORTED.items():
        if s.get(key, unused) not in (unused, 0):
            raise FairseqImportError(f"{key}={s[key]!r} ({what}) is not supported")
    settings = ("embed_dim", "ffn_embed_dim", "layers", "attention_heads", "normalize_before")
    for setting in (*settings, "learned_pos"):
        encoder, decoder = s[f"encoder_{setting}"], s[f"decoder_{setting}"]
        if encoder != decoder:
            raise FairseqImportError(
                f"encoder_{setting}={encoder} differs from decoder_{setting}={decoder}: the "
                "model has one value for both stacks"
            )
    for name in ("decoder_input_dim", "decoder_output_dim"):
        if s[name] != s["decoder_embed_dim"]:
            raise FairseqImportError(
                f"{name}={s[name]} differs from decoder_embed_dim={s['decoder_embed_dim']} "
                "(projections in and out of the decoder are not supported)"
            )
    if str(s["activation_fn"]) not in ACTIVATIONS:
        raise FairseqImportError(
            f"activation_fn={s['activation_fn']!r} is not supported; supported: "
            f"{', '.join(ACTIVATIONS)}"
        )


def _positions(s, position_rows):
    """The config's position settings: fairseq's sinusoid, or its learned tables.

    fairseq's learned table has `max_positions + pad + 1` rows and numbers
    the first token `pad + 1`; the model's table is its rows from `pad + 1`.
    """
    if not s["encoder_learned_pos"]:
        return {
            "position_layout": "halves",
            "position_frequencies": "fairseq",
            "position_offset": PAD_ID + 1,
            "max_position": int(s["max_source_positions"]),
        }
    if position_rows is None or len(position_rows) != 2 or position_rows[0] != position_rows[1]:
        raise FairseqImportError(
            "learned positions need encoder.embed_positions.weight and "
            "decoder.embed_positions.weight of one size (the model has one max_position). "
            f"Received rows: {position_rows}"
        )
    return {"position_embedding": "learned", "max_position": position_rows[0] - PAD_ID - 1}


def transformer_config(settings, source_rows, target_rows, position_rows=None):
    """The `TransformerConfig` of a fairseq model.

    Args:
        settings: complete fairseq settings (`complete_settings`).
        source_rows, target_rows: rows of the encoder and decoder embeddings.
        position_rows: `(encoder, decoder)` rows of learned position tables,
            if the model has them.

    Returns:
        A `TransformerConfig` whose model computes fairseq's logits.

    Raises:
        FairseqImportError: a setting the model cannot represent; one line.
    """
    s = settings
    _check_supported(s)
    shared = bool(s["share_all_embeddings"])
    try:
        return TransformerConfig(
            vocabulary_size=target_rows,
            source_vocabulary_size=None if shared else source_rows,
            share_embeddings=shared,
            tie_output_projection=bool(s["share_decoder_input_output_embed"]),
            num_layers=int(s["encoder_layers"]),
            d_model=int(s["encoder_embed_dim"]),
            num_heads=int(s["encoder_attention_heads"]),
            intermediate_dim=int(s["encoder_ffn_embed_dim"]),
            dropout=float(s["dropout"]),
            attention_dropout=float(s["attention_dropout"]),
            activation_dropout=float(s["activation_dropout"]),
            activation=ACTIVATIONS[str(s["activation_fn"])],
            attention_bias=True,
            normalize_first=bool(s["encoder_normalize_before"]),
            layer_norm_epsilon=1e-5,  # torch.nn.LayerNorm's default, which fairseq uses
            scale_embeddings=not s["no_scale_embedding"],
            pad_id=PAD_ID,
            **_positions(s, position_rows),
        )
    except ValueError as error:
        raise FairseqImportError(f"the settings give no valid model: {error}") from None
