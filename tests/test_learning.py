"""A tiny model learns a sequence-to-sequence task: reversing its input."""

import keras
import numpy as np
from conftest import to_numpy

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, TransformerConfig

BOS, EOS = 1, 2


def reversal_task(rng, count, length=6, vocabulary_size=12):
    source = rng.integers(3, vocabulary_size, size=(count, length)).astype("int32")
    target = source[:, ::-1]
    decoder_inputs = np.concatenate([np.full((count, 1), BOS, "int32"), target], axis=1)
    labels = np.concatenate([target, np.full((count, 1), EOS, "int32")], axis=1)
    return {"encoder_token_ids": source, "decoder_token_ids": decoder_inputs}, labels


def test_tiny_model_learns_to_reverse():
    rng = np.random.default_rng(0)
    config = TransformerConfig(
        vocabulary_size=12,
        num_layers=2,
        d_model=64,
        num_heads=4,
        intermediate_dim=128,
        dropout=0.0,
    )
    model = Seq2SeqTransformer(config)
    # The rate decays to 0 over the 6 epochs: at a constant 2e-3 the loss, near its floor, can
    # spike in the last epoch (seen on AVX-512 CPUs under JAX).
    rate = keras.optimizers.schedules.CosineDecay(2e-3, decay_steps=6 * 4096 // 64)
    model.compile(
        optimizer=keras.optimizers.Adam(rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=LabelSmoothedCrossEntropy(label_smoothing=0.1, subtract_minimum=True),
    )
    inputs, labels = reversal_task(rng, 4096)
    history = model.fit(inputs, labels, batch_size=64, epochs=6, verbose=0)
    assert history.history["loss"][-1] < 0.02, history.history["loss"]

    # Greedy decoding with the cache on unseen sequences reverses them.
    test_inputs, test_labels = reversal_task(np.random.default_rng(1), 64)
    source = test_inputs["encoder_token_ids"]
    cache = model.initialize_cache(model.encode(source), source, max_length=7)
    token = np.full((64, 1), BOS, "int32")
    outputs = []
    for t in range(7):
        logits, cache = model.decode(token, cache, t)
        token = np.argmax(to_numpy(logits), axis=-1).astype("int32")
        outputs.append(token)
    np.testing.assert_array_equal(np.concatenate(outputs, axis=1), test_labels)
