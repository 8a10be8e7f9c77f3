"""`plot_attention`: heatmaps of one layer's attention weights per head (paper figures 3-5)."""

import math

import numpy as np
from keras import ops

from keras_transformer.decoding.translator import to_token_lists
from keras_transformer.figures._matplotlib import new_figure, save_png

KINDS = {
    "encoder_self_attention": ("Encoder self-attention", "source", "source"),
    "decoder_self_attention": ("Decoder self-attention", "target", "target"),
    "decoder_cross_attention": ("Encoder-decoder attention", "target", "source"),
}
MAX_COLUMNS = 4


def _token_ids(tokenize, text):
    if not isinstance(text, str):
        raise TypeError(f"Sentences must be str. Received: {type(text).__name__}")
    return to_token_lists(tokenize([text]))[0]


def _pieces(tokenizer, ids):
    pieces = []
    for token_id in ids:
        piece = tokenizer.id_to_token(int(token_id))
        pieces.append(piece.decode("utf-8") if isinstance(piece, bytes) else str(piece))
    return pieces


def _head_indices(heads, num_heads):
    if heads is None:
        return list(range(num_heads))
    if isinstance(heads, int):
        heads = [heads]
    indices = []
    for head in heads:
        if isinstance(head, bool) or not isinstance(head, (int, np.integer)):
            raise TypeError(f"`heads` must hold int head indices. Received: {head!r}")
        if not -num_heads <= head < num_heads:
            raise ValueError(f"Head {head} is out of range: the model has {num_heads} heads.")
        indices.append(int(head) % num_heads)
    if not indices:
        raise ValueError("`heads` must name at least one head (None: all).")
    return indices


def plot_attention(
    model,
    tokenizer,
    source,
    target,
    path,
    layer=-1,
    kind="encoder_self_attention",
    heads=None,
    dpi=100,
):
    """Draws one layer's attention weights, one heatmap per head, as a PNG.

    Like the paper's figures 3-5: the sentence pair is framed as in training
    (`keras_transformer.data.make_translation_dataset`): encoder input =
    source pieces + EOS, decoder input = BOS + target pieces; the weights
    are `model.attention_weights` of that pair. Each heatmap has a row per
    query and a column per key, labelled with the SentencePiece pieces
    (`tokenizer.id_to_token`), and shares one 0-1 colour scale. Row `i` of
    the decoder's attention is what the decoder looks at while predicting
    target piece `i` (or the final EOS).

    Args:
        model: a `Seq2SeqTransformer`.
        tokenizer: its `SubwordTokenizer`.
        source: str, the source sentence.
        target: str, the target sentence (a reference, or the model's own
            translation).
        path: str or path-like, the PNG to write (atomically; parent folders
            are created).
        layer: int. Index of the layer (Python indexing: -1 is the last).
        kind: `"encoder_self_attention"` (queries and keys: source),
            `"decoder_self_attention"` (target, causal) or
            `"decoder_cross_attention"` (queries: target; keys: source).
        heads: None (all heads), an int, or a list of int head indices.
            The figure's titles number layers and heads from 1.
        dpi: int. Resolution of the PNG; the size grows with the sentence
            lengths and the number of heads.

    Returns:
        A dict: `"weights"`, the plotted float32 array (len(heads),
        query_length, key_length); `"heads"`, the list of head indices;
        `"query_tokens"` and `"key_tokens"`, the axis labels (lists of str);
        `"inputs"`, the model inputs (int32 arrays of shape (1, length)).

    Raises:
        ImportError: matplotlib is missing (install the `plots` extra).
        ValueError: unknown `kind`, or `layer` / `heads` out of range.

    Example:

    >>> model, tokenizer = load_translation_model("runs/base/model.keras", compile=False)
    >>> plot_attention(model, tokenizer, "The dog runs.", "Der Hund rennt.",
    ...                "figures/cross.png", kind="decoder_cross_attention")
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {sorted(KINDS)}. Received: kind={kind!r}")
    source_ids = _token_ids(tokenizer, source) + [tokenizer.eos_id]
    # The target side's model where the tokenizer has one (`JointVocabularyTokenizer`).
    target_ids = [tokenizer.bos_id] + _token_ids(
        getattr(tokenizer, "tokenize_target", tokenizer), target
    )
    inputs = {
        "encoder_token_ids": np.array([source_ids], dtype="int32"),
        "decoder_token_ids": np.array([target_ids], dtype="int32"),
    }
    num_layers = model.config.num_layers
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise TypeError(f"`layer` must be an int. Received: layer={layer!r}")
    if not -num_layers <= layer < num_layers:
        raise ValueError(f"Layer {layer} is out of range: the model has {num_layers} layers.")
    layer_index = int(layer) % num_layers
    head_indices = _head_indices(heads, model.config.num_heads)
    scores = model.attention_weights(inputs)[kind][layer_index]
    weights = np.asarray(ops.convert_to_numpy(scores), dtype="float32")[0][head_indices]
    sides = {"source": _pieces(tokenizer, source_ids), "target": _pieces(tokenizer, target_ids)}
    title, query_side, key_side = KINDS[kind]
    query_tokens, key_tokens = sides[query_side], sides[key_side]

    columns = min(len(head_indices), MAX_COLUMNS)
    rows = math.ceil(len(head_indices) / columns)
    cell = 0.2  # inches per token
    panel_width = max(2.4, 0.9 + cell * len(key_tokens))
    panel_height = max(2.4, 0.9 + cell * len(query_tokens))
    figure = new_figure(
        figsize=(columns * panel_width + 0.8, rows * panel_height + 0.5), layout="constrained"
    )
    panels = list(figure.subplots(rows, columns, squeeze=False).flat)
    for axes in panels[len(head_indices) :]:
        axes.set_visible(False)
    panels = panels[: len(head_indices)]
    for position, axes in enumerate(panels):
        image = axes.imshow(
            weights[position], cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest"
        )
        axes.set_title(f"head {head_indices[position] + 1}", fontsize=9)
        axes.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=7)
        axes.set_yticks(range(len(query_tokens)), query_tokens, fontsize=7)
        axes.set_xlabel(f"key ({key_side})", fontsize=8)
        axes.set_ylabel(f"query ({query_side})", fontsize=8)
    figure.colorbar(image, ax=panels, shrink=0.8, label="attention weight")
    figure.suptitle(f"{title}, layer {layer_index + 1} of {num_layers}")
    save_png(figure, path, dpi)
    return {
        "weights": weights,
        "heads": head_indices,
        "query_tokens": query_tokens,
        "key_tokens": key_tokens,
        "inputs": inputs,
    }
