import csv

import keras
import numpy as np
import pytest
from conftest import random_token_ids

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer
from keras_transformer.training import TrainingMonitor


class BatchLosses(keras.callbacks.Callback):
    """Each batch's own loss, from the running mean `fit` reports after it."""

    def __init__(self):
        super().__init__()
        self.losses = []

    def on_epoch_begin(self, epoch, logs=None):
        self._previous = 0.0

    def on_train_batch_end(self, batch, logs=None):
        running_sum = float(logs["loss"]) * (batch + 1)  # equal batches: a plain mean
        self.losses.append(running_sum - self._previous)
        self._previous = running_sum


@pytest.mark.parametrize("validate", [False, True])
def test_logged_loss_is_the_mean_over_the_steps_since_the_last_record(
    one_layer_config, tmp_path, validate
):
    # 2 epochs of 4 batches, a record every 3 steps: steps 1-3, 4-6 (across the epoch's end
    # and, with validation data, across a validation run that reuses Keras' loss tracker),
    # and 7-8 at the end of training, after the last validation.
    rng = np.random.default_rng(0)
    inputs = {
        "encoder_token_ids": random_token_ids(rng, 8, 5, one_layer_config.vocabulary_size),
        "decoder_token_ids": random_token_ids(rng, 8, 4, one_layer_config.vocabulary_size),
    }
    validation = {
        "encoder_token_ids": random_token_ids(rng, 6, 7, one_layer_config.vocabulary_size),
        "decoder_token_ids": random_token_ids(rng, 6, 6, one_layer_config.vocabulary_size),
    }
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(one_layer_config)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LabelSmoothedCrossEntropy())
    batch_losses = BatchLosses()
    monitor = TrainingMonitor(tmp_path, every_steps=3)
    model.fit(
        inputs,
        inputs["decoder_token_ids"],
        batch_size=2,
        epochs=2,
        verbose=0,
        validation_data=(validation, validation["decoder_token_ids"]) if validate else None,
        callbacks=[batch_losses, monitor],
    )
    with open(tmp_path / TrainingMonitor.CSV_NAME) as file:
        rows = list(csv.DictReader(file))
    assert [int(row["step"]) for row in rows] == [3, 6, 8]
    losses = batch_losses.losses
    expected = [np.mean(losses[0:3]), np.mean(losses[3:6]), np.mean(losses[6:8])]
    np.testing.assert_allclose([float(row["loss"]) for row in rows], expected, rtol=1e-5)
