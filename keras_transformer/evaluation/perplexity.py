"""Per-token perplexity of a dev set (paper Table 3, "PPL (dev)")."""

import math

from keras import ops

from keras_transformer.decoding.search_steps import compile_search
from keras_transformer.models.seq2seq_transformer import INPUT_KEYS


def compile_batch_nll(model, pad_id=None):
    """`batch_nll(inputs, labels) -> (nll, count)` as a compiled program.

    For repeated dev-set scoring (validation while training): build it once
    and pass it to every `perplexity` call, so each batch shape is compiled
    once (on TensorFlow, one graph for all) and later calls run the compiled
    program with the current weights.

    Args:
        model: a `Seq2SeqTransformer`.
        pad_id: int or None, as in `perplexity`.

    Returns:
        A callable for `perplexity(..., batch_nll=...)`.

    Example:

    >>> batch_nll = compile_batch_nll(model)
    >>> perplexity(model, dev, batch_nll=batch_nll)
    """
    if pad_id is None:
        pad_id = getattr(getattr(model, "config", None), "pad_id", 0)
    keys = tuple(INPUT_KEYS)

    def nll(labels, *ids):
        logits = model(dict(zip(keys, ids, strict=True)), training=False)
        return _batch_nll(logits, labels, pad_id)

    compiled = compile_search(nll, model)
    return lambda inputs, labels: compiled(labels, *(inputs[key] for key in keys))


def perplexity(model, dataset, pad_id=None, steps=None, batch_nll=None):
    """exp(total negative log-likelihood / number of real target tokens).

    Table 3 reports "per-wordpiece" dev perplexity: the mean is over
    non-padding target tokens of the whole set (not a mean of per-batch
    means), and there is no label smoothing, so it is the true likelihood
    of the references, unlike the training loss. Dropout is off.

    Args:
        model: a `Seq2SeqTransformer` (or any model mapping the input dict
            to logits (batch, length, vocabulary_size)).
        dataset: iterable of `(inputs, labels)` batches, e.g. a `tf.data`
            dataset or a list: `inputs` a dict with `"encoder_token_ids"`
            and `"decoder_token_ids"`, `labels` int (batch, length).
        pad_id: int. Label id excluded from the count; None uses
            `model.config.pad_id` if the model has a config, else 0.
        steps: int or None. Number of batches to read; None reads the
            whole (finite) dataset.
        batch_nll: None (run the model eagerly) or the compiled program of
            `compile_batch_nll(model, pad_id)`.

    Returns:
        float, the perplexity (>= 1; `inf` when it exceeds the float range).

    Example:

    >>> dev = make_translation_dataset(dev_corpus, tokenizer).dataset
    >>> perplexity(model, dev)
    4.92
    """
    if pad_id is None:
        pad_id = getattr(getattr(model, "config", None), "pad_id", 0)
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(f"`steps` must be a positive int or None. Received: steps={steps!r}")
    # tf.data yields TensorFlow tensors, which the JAX backend cannot take.
    batches = dataset.as_numpy_iterator() if hasattr(dataset, "as_numpy_iterator") else dataset
    total_nll, num_tokens, num_batches = 0.0, 0, 0
    for index, batch in enumerate(batches):
        if steps is not None and index >= steps:
            break
        inputs, labels = _unpack(batch, index)
        if batch_nll is None:
            nll, count = _batch_nll(model(inputs, training=False), labels, pad_id)
        else:
            nll, count = batch_nll(inputs, labels)
        # Accumulate on the host in float64: float32 sums over a dev set lose digits.
        total_nll += float(ops.convert_to_numpy(nll))
        num_tokens += int(ops.convert_to_numpy(count))
        num_batches += 1
    if num_tokens == 0:
        raise ValueError(
            f"The dataset has no target token other than pad_id={pad_id} "
            f"(read {num_batches} batches): perplexity is undefined."
        )
    mean = total_nll / num_tokens
    return math.exp(mean) if mean < 709.0 else math.inf  # a diverged model: no OverflowError


def _batch_nll(logits, labels, pad_id):
    """Sum of -log p(label) over non-padding labels, and their number."""
    logits = ops.cast(logits, "float32")
    labels = ops.cast(labels, "int32")
    log_normalizer = ops.logsumexp(logits, axis=-1)
    label_logits = ops.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    real = ops.not_equal(labels, pad_id)
    nll = ops.sum(ops.where(real, log_normalizer - label_logits, 0.0))
    return nll, ops.sum(ops.cast(real, "int32"))


def _unpack(batch, index):
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise ValueError(
            f"Each batch must be an `(inputs, labels)` pair. Received: batch {index} of type "
            f"{type(batch).__name__}" + (f" with {len(batch)} elements" if _sized(batch) else "")
        )
    inputs, labels = batch
    if not isinstance(inputs, dict) or sorted(inputs) != sorted(INPUT_KEYS):
        received = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(
            f"Batch {index}: `inputs` must be a dict with keys {list(INPUT_KEYS)}. "
            f"Received: {received}"
        )
    if len(ops.shape(labels)) != 2:
        raise ValueError(
            f"Batch {index}: `labels` must have shape (batch, length). "
            f"Received: shape={tuple(ops.shape(labels))}"
        )
    return inputs, labels


def _sized(value):
    return hasattr(value, "__len__")
