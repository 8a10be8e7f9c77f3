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


def previous_sinusoid(length, d_model):
    """The layer's computation before `layout`, `frequencies` and `offset` existed."""
    from keras import ops

    positions = ops.cast(ops.arange(length), "float32")
    dims = ops.arange(d_model)
    even_dims = ops.cast(dims - dims % 2, "float32")
    inverse_frequency = ops.power(
        ops.cast(10000.0, "float32"), -even_dims / ops.cast(d_model, "float32")
    )
    angles = positions[:, None] * inverse_frequency[None, :]
    return to_numpy(ops.where(dims % 2 == 0, ops.sin(angles), ops.cos(angles)))


@pytest.mark.parametrize("d_model", [512, 7])
def test_default_sinusoid_is_unchanged_bit_for_bit(d_model):
    encodings = to_numpy(SinusoidalPositionEmbedding()(np.zeros((1, 300, d_model), "float32")))[0]
    np.testing.assert_array_equal(encodings, previous_sinusoid(300, d_model))


def other_sinusoid(length, d_model, layout, frequencies, offset):
    """float64 NumPy: Marian's table ([sin | cos] halves, the paper's frequencies) and
    fairseq's (halves, frequencies exp(-i ln(10000) / (d_model/2 - 1)))."""
    positions = np.arange(length, dtype="float64")[:, None] + offset
    pairs = np.arange((d_model + 1) // 2, dtype="float64")
    if frequencies == "paper":
        inverse_frequency = 10000.0 ** (-2.0 * pairs / d_model)
    else:
        inverse_frequency = np.exp(-pairs * np.log(10000.0) / (d_model // 2 - 1))
    angles = positions * inverse_frequency
    sines, cosines = np.sin(angles), np.cos(angles[:, : d_model // 2])
    if layout == "halves":
        return np.concatenate([sines, cosines], axis=1)
    table = np.zeros((length, d_model))
    table[:, 0::2], table[:, 1::2] = sines, cosines
    return table


@pytest.mark.parametrize(
    ("d_model", "layout", "frequencies", "offset"),
    [
        (16, "halves", "paper", 0),  # Marian
        (7, "halves", "paper", 0),  # Marian with an odd width: one sine more than cosines
        (16, "halves", "fairseq", 2),  # fairseq, padding id 1
        (16, "interleaved", "fairseq", 0),
        (16, "interleaved", "paper", 3),
    ],
)
def test_sinusoid_options_match_closed_form(d_model, layout, frequencies, offset):
    layer = SinusoidalPositionEmbedding(layout=layout, frequencies=frequencies, offset=offset)
    encodings = to_numpy(layer(np.zeros((1, 120, d_model), "float32")))[0]
    expected = other_sinusoid(120, d_model, layout, frequencies, offset)
    np.testing.assert_allclose(encodings, expected, atol=2e-5, rtol=0)
    step = to_numpy(layer(np.zeros((1, 1, d_model), "float32"), start_index=37))[0, 0]
    np.testing.assert_allclose(step, expected[37], atol=2e-5, rtol=0)
    clone = SinusoidalPositionEmbedding.from_config(layer.get_config())
    # A table of another length may round differently in the last bit.
    np.testing.assert_allclose(
        to_numpy(clone(np.zeros((1, 5, d_model), "float32")))[0], encodings[:5], atol=1e-6, rtol=0
    )


def test_marian_sinusoid_golden_values():
    # d_model 4, halves: [sin(p), sin(p / 100), cos(p), cos(p / 100)].
    layer = SinusoidalPositionEmbedding(layout="halves")
    encodings = to_numpy(layer(np.zeros((1, 2, 4), "float32")))[0]
    np.testing.assert_allclose(encodings[0], [0.0, 0.0, 1.0, 1.0], atol=1e-7)
    expected = [np.sin(1.0), np.sin(0.01), np.cos(1.0), np.cos(0.01)]
    np.testing.assert_allclose(encodings[1], expected, atol=1e-6)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"layout": "split"}, "layout"),
        ({"frequencies": "t2t"}, "frequencies"),
        ({"offset": -1}, "offset"),
        ({"offset": 1.5}, "offset"),
    ],
)
def test_sinusoid_rejects_unknown_options(arguments, message):
    with pytest.raises(ValueError, match=message):
        SinusoidalPositionEmbedding(**arguments)
