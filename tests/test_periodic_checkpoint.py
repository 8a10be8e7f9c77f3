import os

import keras
import numpy as np
import pytest
from conftest import random_token_ids, to_numpy

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer
from keras_transformer.checkpoints import PeriodicCheckpoint


def test_checkpoints_every_n_steps_keep_last_k_and_average_at_end(tiny_config, tmp_path):
    rng = np.random.default_rng(0)
    inputs = {
        "encoder_token_ids": random_token_ids(rng, 12, 5, tiny_config.vocabulary_size),
        "decoder_token_ids": random_token_ids(rng, 12, 4, tiny_config.vocabulary_size),
    }
    model = Seq2SeqTransformer(tiny_config)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LabelSmoothedCrossEntropy())
    callback = PeriodicCheckpoint(
        tmp_path, every_steps=2, every_minutes=None, keep=3, average_last=2
    )
    model.fit(
        inputs, inputs["decoder_token_ids"], batch_size=2, epochs=1, verbose=0, callbacks=[callback]
    )
    names = sorted(os.listdir(tmp_path))
    assert names == [f"ckpt-{s:08d}.weights.h5" for s in (2, 4, 6)]

    def weights_of(name):
        fresh = Seq2SeqTransformer(tiny_config)
        fresh.build()
        fresh.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LabelSmoothedCrossEntropy())
        fresh.load_weights(tmp_path / name)
        return [to_numpy(w) for w in fresh.weights]

    last_two = [weights_of(name) for name in names[-2:]]
    for averaged, a, b in zip(model.weights, *last_two, strict=True):
        np.testing.assert_allclose(to_numpy(averaged), (a + b) / 2, rtol=1e-6, atol=1e-7)
    assert not np.allclose(last_two[0][0], last_two[1][0])


def test_bad_schedule_arguments(tmp_path):
    with pytest.raises(ValueError, match="neither"):
        PeriodicCheckpoint(tmp_path, every_steps=None, every_minutes=None)
    with pytest.raises(ValueError, match="average_last"):
        PeriodicCheckpoint(tmp_path, every_steps=1, keep=2, average_last=3)
