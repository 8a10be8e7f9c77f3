import keras
import numpy as np
import pytest
from conftest import to_numpy

from keras_transformer.layers import LearnedPositionEmbedding, SinusoidalPositionEmbedding


def closed_form(position, dim, d_model):
    # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))  (3.5)
    two_i = dim - dim % 2
    angle = position / 10000 ** (two_i / d_model)
    return np.sin(angle) if dim % 2 == 0 else np.cos(angle)


@pytest.mark.parametrize("d_model", [512, 7])
def test_sinusoid_matches_closed_form_at_golden_positions(d_model):
    encodings = to_numpy(SinusoidalPositionEmbedding()(np.zeros((1, 120, d_model), "float32")))[0]
    for position in (0, 1, 2, 17, 50, 119):
        for dim in (0, 1, 2, 3, d_model // 2, d_model - 2, d_model - 1):
            expected = closed_form(position, dim, d_model)
            assert encodings[position, dim] == pytest.approx(expected, abs=2e-5)


def test_sinusoid_golden_values_interleaved():
    encodings = to_numpy(SinusoidalPositionEmbedding()(np.zeros((1, 2, 4), "float32")))[0]
    # Position 1, d_model 4: dims (0, 1) at frequency 1, dims (2, 3) at 1/100.
    expected = [np.sin(1.0), np.cos(1.0), np.sin(0.01), np.cos(0.01)]
    np.testing.assert_allclose(encodings[0], [0.0, 1.0, 0.0, 1.0], atol=1e-7)
    np.testing.assert_allclose(encodings[1], expected, atol=1e-6)


@pytest.mark.parametrize(
    "layer",
    [SinusoidalPositionEmbedding(), LearnedPositionEmbedding(max_length=40)],
    ids=["sinusoidal", "learned"],
)
def test_start_index_gives_the_slice_of_the_full_encoding(layer):
    full = to_numpy(layer(np.zeros((2, 30, 8), "float32")))
    for start in (0, 5, 29):
        step = to_numpy(layer(np.zeros((2, 1, 8), "float32"), start_index=start))
        np.testing.assert_allclose(step[:, 0], full[:, start], atol=1e-6)
    tensor_start = keras.ops.convert_to_tensor(12, "int32")
    step = to_numpy(layer(np.zeros((2, 1, 8), "float32"), start_index=tensor_start))
    np.testing.assert_allclose(step[:, 0], full[:, 12], atol=1e-6)
    # Self-consistency alone would pass for any fixed shift: pin position p to row p of the
    # learned table, or to PE(p) of the closed form (3.5).
    if isinstance(layer, LearnedPositionEmbedding):
        table = to_numpy(layer.position_embeddings)
    else:
        table = np.array([[closed_form(p, dim, 8) for dim in range(8)] for p in range(40)])
    np.testing.assert_allclose(full, np.broadcast_to(table[:30], full.shape), atol=1e-6)
    for start, length in ((0, 3), (5, 4), (29, 11)):
        window = to_numpy(layer(np.zeros((2, length, 8), "float32"), start_index=start))
        expected = table[start : start + length]
        np.testing.assert_allclose(window, np.broadcast_to(expected, window.shape), atol=1e-6)


def test_sinusoid_follows_compute_dtype():
    layer = SinusoidalPositionEmbedding(dtype="mixed_bfloat16")
    out = layer(keras.ops.zeros((1, 3, 8), "bfloat16"))
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"


def test_learned_positions_reject_positions_past_max_length():
    layer = LearnedPositionEmbedding(max_length=4)
    with pytest.raises(ValueError, match="max_length"):
        layer(np.zeros((1, 5, 8), "float32"))


def test_position_layers_round_trip_config():
    for layer in (SinusoidalPositionEmbedding(max_wavelength=500.0), LearnedPositionEmbedding(9)):
        clone = layer.__class__.from_config(layer.get_config())
        assert clone.get_config() == layer.get_config()
