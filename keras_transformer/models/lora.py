"""LoRA on a `Seq2SeqTransformer`: Keras' own `enable_lora` on the chosen projections, the
rest of the model frozen, and the merged weights of a plain model."""

from keras import ops

from keras_transformer import backend
from keras_transformer.compat import lora_base_kernel
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.models.lora_targets import check_lora_rank, check_lora_targets

PROJECTIONS = ("query", "key", "value", "output")
# `query+value`: W^Q and W^V only, the projections Hu et al. (2021) adapt.
QUERY_VALUE = ("query", "value")


def lora_layers(model, targets):
    """`[(name, layer)]` of the projections `targets` adapts, in the model's order.

    Names are the model's structure: `encoder_0/self_attention/query`,
    `decoder_1/feed_forward/inner`, ... (the same in every model of one config).
    """
    check_lora_targets(targets)
    found = []
    for side, blocks in (("encoder", model.encoder_blocks), ("decoder", model.decoder_blocks)):
        for index, block in enumerate(blocks):
            for part in ("self_attention", "cross_attention"):
                attention = getattr(block, part, None)
                if isinstance(attention, MultiHeadAttention):
                    found += [
                        (f"{side}_{index}/{part}/{name}", getattr(attention, f"{name}_dense"))
                        for name in (QUERY_VALUE if targets == "query+value" else PROJECTIONS)
                    ]
            if targets == "attention+ffn":
                found += [
                    (f"{side}_{index}/feed_forward/{name}", getattr(block.feed_forward, name))
                    for name in ("inner_dense", "output_dense")
                ]
    return found


def enable_model_lora(model, rank, targets, alpha):
    """Freezes every weight of `model` and adds Keras' LoRA factors to `targets`.

    Returns:
        The `{"rank", "alpha", "targets"}` settings applied.
    """
    check_lora_targets(targets)
    check_lora_rank(rank, model.config, targets)
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, int | float)):
        raise ValueError(f"`alpha` must be a number. Received: {alpha!r}")
    if alpha is not None and alpha <= 0:
        raise ValueError(f"`alpha` must be positive. Received: {alpha!r}")
    if not model.built:
        model.build()
    for variable in model.weights:
        variable.trainable = False
    with backend.frozen_heap():  # each factor Keras drops and remakes would walk the heap
        for _, layer in lora_layers(model, targets):
            layer.enable_lora(rank, lora_alpha=alpha)
    return {"rank": rank, "alpha": rank if alpha is None else alpha, "targets": targets}


def lora_factors(model):
    """`{name: (A, B)}` variables of a model with LoRA enabled."""
    if not model.lora_settings:
        return {}
    layers = lora_layers(model, model.lora_settings["targets"])
    return {name: (layer.lora_kernel_a, layer.lora_kernel_b) for name, layer in layers}


def merged_kernel(layer):
    """`kernel + (alpha / rank) A B` of a LoRA-enabled layer, as its `kernel` property
    computes it (A B contracts the rank axis), in the stored kernel's dtype."""
    base = lora_base_kernel(layer)
    delta = (layer.lora_alpha / layer.lora_rank) * ops.tensordot(
        layer.lora_kernel_a, layer.lora_kernel_b, axes=1
    )
    return ops.cast(ops.add(base, delta), base.dtype)


def merged_weight_values(model):
    """The weights of a plain model of `model`'s config (its order): LoRA merged in.

    Returns:
        list of numpy arrays, for `set_weights` of a model without LoRA.
    """
    if not model.lora_settings:
        return model.get_weights()
    layers = [layer for _, layer in lora_layers(model, model.lora_settings["targets"])]
    factors = {id(v) for layer in layers for v in (layer.lora_kernel_a, layer.lora_kernel_b)}
    kernels = {id(lora_base_kernel(layer)): layer for layer in layers}
    values = []
    for variable in model.weights:
        if id(variable) in factors:
            continue
        layer = kernels.get(id(variable))
        values.append(ops.convert_to_numpy(variable if layer is None else merged_kernel(layer)))
    return values
