"""A format's names of the tensors inside its layers, as a name map for `set_weights`.

Formats name a layer's tensors by one pattern each: fairseq and Hugging Face's BART family
(Marian) `{prefix}.layers.{i}.self_attn.q_proj.weight`, OpenNMT-py
`encoder.transformer.{i}.self_attn.linear_query.weight`. `LayerNames` holds a pattern and
`layer_tensor_names` spells out every weight of every layer with it.
"""

import dataclasses

from keras_transformer.pretrained.weight_setter import Tensor

# Our attention projections and the rule of their kernels (weight_setter.RULES).
PROJECTION_RULES = {
    "query": "linear_heads",
    "key": "linear_heads",
    "value": "linear_heads",
    "output": "linear_merge",
}
SUBLAYERS = (
    "self_attention",
    "self_attention_norm",
    "cross_attention",
    "cross_attention_norm",
    "feed_forward.inner",
    "feed_forward.output",
    "feed_forward_norm",
)

# fairseq's (and Hugging Face BART's) names of a layer's tensors.
BART_SUBLAYERS = {
    "self_attention": "self_attn",
    "self_attention_norm": "self_attn_layer_norm",
    "cross_attention": "encoder_attn",
    "cross_attention_norm": "encoder_attn_layer_norm",
    "feed_forward.inner": "fc1",
    "feed_forward.output": "fc2",
    "feed_forward_norm": "final_layer_norm",
}
BART_PROJECTIONS = {"query": "q_proj", "key": "k_proj", "value": "v_proj", "output": "out_proj"}


@dataclasses.dataclass(frozen=True)
class LayerNames:
    """How a format names the tensors of its encoder and decoder layers.

    Args:
        encoder: str, a layer's prefix with `{i}` for its index
            (`"encoder.layers.{i}"`).
        decoder: str, likewise.
        sublayers: dict, our sublayer (`SUBLAYERS`) -> its name; a key
            `"encoder.NAME"` or `"decoder.NAME"` names it in one stack only.
        projections: dict, `query`, `key`, `value`, `output` -> its names.
        weight: str, the name of a Linear's or a LayerNorm's weight.
        bias: str, likewise of its bias.

    Example:

    >>> LayerNames("encoder.layers.{i}", "decoder.layers.{i}", {...}, {...})
    """

    encoder: str
    decoder: str
    sublayers: dict
    projections: dict
    weight: str = "weight"
    bias: str = "bias"

    def sublayer(self, stack, name):
        """The format's name of our sublayer `name` in `stack`."""
        return self.sublayers.get(f"{stack}.{name}", self.sublayers.get(name))


def bart_layer_names(encoder_prefix, decoder_prefix):
    """The `LayerNames` of fairseq and BART's family: `{prefix}.layers.{i}.self_attn.q_proj`."""
    return LayerNames(
        f"{encoder_prefix}.layers.{{i}}",
        f"{decoder_prefix}.layers.{{i}}",
        BART_SUBLAYERS,
        BART_PROJECTIONS,
    )


def _norm(path, prefix, names):
    return {
        f"{path}.gamma": Tensor(f"{prefix}.{names.weight}"),
        f"{path}.beta": Tensor(f"{prefix}.{names.bias}"),
    }


def _attention(path, prefix, names, bias):
    result = {}
    for part, rule in PROJECTION_RULES.items():
        name = f"{prefix}.{names.projections[part]}"
        result[f"{path}.{part}.kernel"] = Tensor(f"{name}.{names.weight}", rule)
        if bias:
            bias_rule = "heads" if rule == "linear_heads" else "same"
            result[f"{path}.{part}.bias"] = Tensor(f"{name}.{names.bias}", bias_rule)
    return result


def layer_tensor_names(config, names):
    """path -> `Tensor` for every weight of every encoder and decoder layer.

    Args:
        config: the model's `TransformerConfig` (layers, attention biases).
        names: the format's `LayerNames`.

    Returns:
        dict, for `set_weights` (with the format's embeddings and norms added).

    Example:

    >>> layer_tensor_names(config, FAIRSEQ_LAYERS)["encoder.0.feed_forward.inner.kernel"]
    Tensor(name='encoder.layers.0.fc1.weight', rule='linear', start_row=0)
    """
    result = {}
    for stack, pattern in (("encoder", names.encoder), ("decoder", names.decoder)):
        for index in range(config.num_layers):
            prefix, path = pattern.format(i=index), f"{stack}.{index}"
            attentions = ("self_attention",) + (("cross_attention",) if stack == "decoder" else ())
            for attention in attentions:
                sublayer = f"{prefix}.{names.sublayer(stack, attention)}"
                result.update(
                    _attention(f"{path}.{attention}", sublayer, names, config.attention_bias)
                )
                norm = f"{prefix}.{names.sublayer(stack, attention + '_norm')}"
                result.update(_norm(f"{path}.{attention}_norm", norm, names))
            for part in ("inner", "output"):
                dense = f"{prefix}.{names.sublayer(stack, 'feed_forward.' + part)}"
                result[f"{path}.feed_forward.{part}.kernel"] = Tensor(
                    f"{dense}.{names.weight}", "linear"
                )
                result[f"{path}.feed_forward.{part}.bias"] = Tensor(f"{dense}.{names.bias}")
            norm = f"{prefix}.{names.sublayer(stack, 'feed_forward_norm')}"
            result.update(_norm(f"{path}.feed_forward_norm", norm, names))
    return result


def final_norm_names(encoder_prefix, decoder_prefix, weight="weight", bias="bias"):
    """The name map of the final LayerNorms of a pre-LN model."""
    return {
        "encoder.final_norm.gamma": Tensor(f"{encoder_prefix}.{weight}"),
        "encoder.final_norm.beta": Tensor(f"{encoder_prefix}.{bias}"),
        "decoder.final_norm.gamma": Tensor(f"{decoder_prefix}.{weight}"),
        "decoder.final_norm.beta": Tensor(f"{decoder_prefix}.{bias}"),
    }
