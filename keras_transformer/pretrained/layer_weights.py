"""Weights named as fairseq and Hugging Face's BART family name them, put into our layers.

fairseq's `transformer` and transformers' Marian (a BART descendant) name a layer's tensors
alike: `{prefix}.layers.{i}.self_attn.{q,k,v,out}_proj.{weight,bias}`, `self_attn_layer_norm`,
`encoder_attn` and `encoder_attn_layer_norm` (decoder), `fc1`, `fc2`, `final_layer_norm`.
Linear weights are torch's (outputs, inputs); our kernels are (inputs, outputs), and the
attention projections split the heads out: (d_model, heads, head_dim) and
(heads, head_dim, d_model).
"""

import numpy as np


class StateDict:
    """The tensors of a checkpoint, taken one by one, so that none goes unused.

    Args:
        tensors: dict of name -> numpy array.
        source: str, the file they came from, for messages.
    """

    def __init__(self, tensors, source):
        self.tensors = dict(tensors)
        self.source = source

    def __contains__(self, name):
        return name in self.tensors

    def take(self, name):
        """The float32 array `name`, removed from the ones left.

        Raises:
            ValueError: no tensor of that name.
        """
        if name not in self.tensors:
            raise ValueError(f"{self.source}: no tensor {name!r}")
        return np.asarray(self.tensors.pop(name), dtype="float32")

    def check_all_used(self):
        """Raises ValueError naming the tensors nothing took: a layout this import misreads."""
        if self.tensors:
            names = sorted(self.tensors)
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            raise ValueError(f"{self.source}: tensors this import does not know: {shown}")


def assign(variable, array, name):
    """`variable.assign(array)`, after checking the shape; `name` is the tensor, for messages."""
    expected = tuple(variable.shape)
    if tuple(array.shape) != expected:
        raise ValueError(f"{name}: shape {tuple(array.shape)}, the model expects {expected}")
    variable.assign(array.astype(variable.dtype))


def set_dense(dense, tensors, prefix):
    """A torch `Linear` (`{prefix}.weight`, `.bias`) into a Keras `Dense`."""
    assign(dense.kernel, tensors.take(f"{prefix}.weight").T, f"{prefix}.weight")
    if dense.bias is not None:
        assign(dense.bias, tensors.take(f"{prefix}.bias"), f"{prefix}.bias")


def set_norm(norm, tensors, prefix):
    assign(norm.gamma, tensors.take(f"{prefix}.weight"), f"{prefix}.weight")
    assign(norm.beta, tensors.take(f"{prefix}.bias"), f"{prefix}.bias")


def set_attention(attention, tensors, prefix):
    """`{prefix}.{q,k,v,out}_proj` into a `MultiHeadAttention`'s four `EinsumDense`s."""
    heads = attention.num_heads
    for name, dense in (
        ("q_proj", attention.query_dense),
        ("k_proj", attention.key_dense),
        ("v_proj", attention.value_dense),
    ):
        weight = tensors.take(f"{prefix}.{name}.weight")  # (heads * head_dim, d_model)
        kernel = weight.T.reshape(weight.shape[1], heads, -1)
        assign(dense.kernel, kernel, f"{prefix}.{name}.weight")
        if dense.bias is not None:
            bias = tensors.take(f"{prefix}.{name}.bias").reshape(heads, -1)
            assign(dense.bias, bias, f"{prefix}.{name}.bias")
    weight = tensors.take(f"{prefix}.out_proj.weight")  # (d_model, heads * head_dim)
    kernel = weight.T.reshape(heads, -1, weight.shape[0])
    assign(attention.output_dense.kernel, kernel, f"{prefix}.out_proj.weight")
    if attention.output_dense.bias is not None:
        bias = tensors.take(f"{prefix}.out_proj.bias")
        assign(attention.output_dense.bias, bias, f"{prefix}.out_proj.bias")


def set_feed_forward(block, tensors, prefix):
    set_dense(block.feed_forward.inner_dense, tensors, f"{prefix}.fc1")
    set_dense(block.feed_forward.output_dense, tensors, f"{prefix}.fc2")
    set_norm(block.feed_forward_norm, tensors, f"{prefix}.final_layer_norm")


def set_layers(model, tensors, encoder_prefix, decoder_prefix):
    """Every encoder and decoder layer of a built `Seq2SeqTransformer`.

    Args:
        model: the model, built.
        tensors: a `StateDict`.
        encoder_prefix: e.g. `"model.encoder"` (Marian) or `"encoder"` (fairseq).
        decoder_prefix: likewise for the decoder.
    """
    for i, block in enumerate(model.encoder_blocks):
        prefix = f"{encoder_prefix}.layers.{i}"
        set_attention(block.self_attention, tensors, f"{prefix}.self_attn")
        set_norm(block.self_attention_norm, tensors, f"{prefix}.self_attn_layer_norm")
        set_feed_forward(block, tensors, prefix)
    for i, block in enumerate(model.decoder_blocks):
        prefix = f"{decoder_prefix}.layers.{i}"
        set_attention(block.self_attention, tensors, f"{prefix}.self_attn")
        set_norm(block.self_attention_norm, tensors, f"{prefix}.self_attn_layer_norm")
        set_attention(block.cross_attention, tensors, f"{prefix}.encoder_attn")
        set_norm(block.cross_attention_norm, tensors, f"{prefix}.encoder_attn_layer_norm")
        set_feed_forward(block, tensors, prefix)
