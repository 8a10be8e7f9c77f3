"""The one weight setter of every import: a format's tensor-name map applied to a model.

Every weight of a built `Seq2SeqTransformer` has a path here (`model_weights`):
`target_embedding`, `source_embedding`, `output_projection`, `logits_bias`,
`source_positions`, `target_positions`, `encoder.final_norm.gamma`, and per layer
`encoder.3.self_attention.query.kernel`, `decoder.0.cross_attention_norm.beta`,
`decoder.5.feed_forward.inner.bias`, ... A format's name map gives, for each path, the
`Tensor` of its checkpoint that holds the weight (tensor_names.py builds the per-layer part).
"""

import dataclasses

import numpy as np

# How a checkpoint's tensor becomes a weight of ours. torch's `Linear` stores (outputs,
# inputs); our kernels are (inputs, outputs), and the attention projections split the heads
# out: (d_model, heads, head_dim) for queries, keys and values, (heads, head_dim, d_model)
# for the output.
RULES = ("same", "linear", "linear_heads", "linear_merge", "heads", "zeros")


@dataclasses.dataclass(frozen=True)
class Tensor:
    """Where a weight comes from: a tensor of the checkpoint and how it is laid out.

    Args:
        name: str, the checkpoint's tensor name (None for `rule="zeros"`).
        rule: str, one of `RULES`: "same" (as is), "linear" (a torch Linear
            weight, transposed), "linear_heads" (a Linear into the heads:
            transposed, then split), "linear_merge" (a Linear out of the heads),
            "heads" (a bias split into heads), "zeros" (the format has no such
            tensor: the weight is zero, which computes the same).
        start_row: int, rows of the tensor before the weight's first (fairseq's
            learned positions start after the padding id).
    """

    name: str | None
    rule: str = "same"
    start_row: int = 0

    def __post_init__(self):
        if self.rule not in RULES:
            raise ValueError(f"`rule` must be one of {RULES}. Received: rule={self.rule!r}")


def expected_shape(rule, shape, start_row=0):
    """The shape the checkpoint's tensor must have for a weight of `shape`."""
    shape = tuple(shape)
    if rule == "linear":
        return (shape[1], shape[0])
    if rule == "linear_heads":
        return (int(np.prod(shape[1:])), shape[0])
    if rule == "linear_merge":
        return (shape[-1], int(np.prod(shape[:-1])))
    if rule == "heads":
        return (int(np.prod(shape)),)
    return (shape[0] + start_row, *shape[1:])


def converted(tensor, array, shape):
    """`array` in the layout of a weight of `shape` (shapes already checked)."""
    if tensor.rule in ("linear", "linear_heads", "linear_merge"):
        return array.T.reshape(shape)
    if tensor.rule == "heads":
        return array.reshape(shape)
    return array[tensor.start_row :]


def _norm(prefix, norm):
    return {f"{prefix}.gamma": norm.gamma, f"{prefix}.beta": norm.beta}


def _dense(prefix, dense):
    weights = {f"{prefix}.kernel": dense.kernel}
    if dense.bias is not None:
        weights[f"{prefix}.bias"] = dense.bias
    return weights


def _block(prefix, block):
    weights = {}
    for name in ("self_attention", "cross_attention"):
        attention = getattr(block, name, None)
        if attention is None:
            continue
        for part in ("query", "key", "value", "output"):
            weights.update(_dense(f"{prefix}.{name}.{part}", getattr(attention, f"{part}_dense")))
        weights.update(_norm(f"{prefix}.{name}_norm", getattr(block, f"{name}_norm")))
    weights.update(_dense(f"{prefix}.feed_forward.inner", block.feed_forward.inner_dense))
    weights.update(_dense(f"{prefix}.feed_forward.output", block.feed_forward.output_dense))
    weights.update(_norm(f"{prefix}.feed_forward_norm", block.feed_forward_norm))
    return weights


def model_weights(model):
    """path -> variable for every weight of a built `Seq2SeqTransformer`.

    Example:

    >>> sorted(model_weights(model))[:2]
    ['decoder.0.cross_attention.key.bias', 'decoder.0.cross_attention.key.kernel']
    """
    c = model.config
    weights = {"target_embedding": model.target_embedding.embeddings}
    if not c.share_embeddings:
        weights["source_embedding"] = model.source_embedding.embeddings
    if model.output_projection is not None:
        weights["output_projection"] = model.output_projection.kernel
    if model.logits_bias is not None:
        weights["logits_bias"] = model.logits_bias
    if c.position_embedding == "learned":
        weights["source_positions"] = model.source_position_embedding.position_embeddings
        weights["target_positions"] = model.target_position_embedding.position_embeddings
    if model.encoder_final_norm is not None:
        weights.update(_norm("encoder.final_norm", model.encoder_final_norm))
        weights.update(_norm("decoder.final_norm", model.decoder_final_norm))
    for stack, blocks in (("encoder", model.encoder_blocks), ("decoder", model.decoder_blocks)):
        for index, block in enumerate(blocks):
            weights.update(_block(f"{stack}.{index}", block))
    return weights


def set_weights(model, names, tensors):
    """Puts a checkpoint's tensors into a built `Seq2SeqTransformer` by a name map.

    Args:
        model: the model, built, of the format's `TransformerConfig`.
        names: dict, path (`model_weights`) -> `Tensor`.
        tensors: a `StateDict` (state_dict.py); every tensor must be taken.

    Raises:
        ValueError: one line: a tensor missing, of another shape, or left over.

    Example:

    >>> set_weights(model, {"target_embedding": Tensor("embed.weight"), ...}, tensors)
    """
    for path, variable in model_weights(model).items():
        if path not in names:
            raise ValueError(f"{tensors.source}: the import names no tensor for {path}")
        tensor = names[path]
        shape = tuple(variable.shape)
        if tensor.rule == "zeros":
            variable.assign(np.zeros(shape, variable.dtype))
            continue
        array = tensors.take(tensor.name)
        expected = expected_shape(tensor.rule, shape, tensor.start_row)
        if tuple(array.shape) != expected:
            raise ValueError(
                f"{tensors.source}: {tensor.name} has shape {tuple(array.shape)}; the model's "
                f"{path} needs {expected}"
            )
        variable.assign(converted(tensor, array, shape).astype(variable.dtype))
    tensors.check_all_used()


def check_position_tables(model, tensors, names, what, rows=None):
    """Stored sinusoid tables (buffers a checkpoint keeps) must equal the ones we compute.

    Args:
        model: the built `Seq2SeqTransformer`.
        tensors: the `StateDict`; the tables found are taken.
        names: `(encoder's, decoder's)` tensor names of the tables.
        what: str, what the table should be, for the message.
        rows: int or None, the first rows compared (far positions' float32 angles
            differ in their last digits).

    Raises:
        ValueError: a table differs; the message names it.
    """
    from keras import ops

    layers = (model.source_position_embedding, model.target_position_embedding)
    for name, layer in zip(names, layers, strict=True):
        if name in tensors:
            table = tensors.take(name).reshape(-1, model.config.d_model)[:rows]
            ours = ops.convert_to_numpy(layer(ops.zeros((1, *table.shape), "float32")))[0]
            if not np.allclose(table, ours, atol=1e-4):
                raise ValueError(f"{tensors.source}: {name} is not {what}")
