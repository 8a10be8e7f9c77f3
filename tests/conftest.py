import keras
import pytest

from keras_transformer import TransformerConfig


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    keras.utils.set_random_seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture
def tiny_config():
    return TransformerConfig(
        vocabulary_size=31,
        num_layers=2,
        d_model=16,
        num_heads=4,
        intermediate_dim=32,
        dropout=0.0,
    )


def random_token_ids(rng, batch, length, vocabulary_size, min_length=1, pad_id=0):
    """Right-padded random ids with lengths in [min_length, length]."""
    ids = rng.integers(1, vocabulary_size, size=(batch, length)).astype("int32")
    for row, row_length in enumerate(rng.integers(min_length, length + 1, size=batch)):
        ids[row, row_length:] = pad_id
    return ids


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)
