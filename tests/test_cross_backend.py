"""The same weights give the same logits and translations on TensorFlow, JAX and torch.

Each backend's suite compares itself with the next backend of a cycle (TensorFlow with
JAX, JAX with torch, torch with TensorFlow), so CI's three suites check every pair once.
"""

import importlib
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from conftest import random_token_ids, to_numpy

from keras_transformer import Seq2SeqTransformer
from keras_transformer.decoding import build_beam_search, build_greedy_search, build_sampling_search

OTHER_BACKEND = {"tensorflow": "jax", "jax": "torch", "torch": "tensorflow"}[
    keras.backend.backend()
]
BOS, EOS = 2, 3
# 1 (set in CI): fail rather than skip when the other backend is not installed.
REQUIRE_ALL_BACKENDS = os.environ.get("KERAS_TRANSFORMER_REQUIRE_ALL_BACKENDS") == "1"
# Samples of one seed: the same on every backend (a counter-based hash draws them).
SAMPLING = {
    "num_results": 3, "temperature": 1.2, "top_p": 0.9, "sampling_seed": 4, "max_extra_length": 4
}  # fmt: skip

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import keras
    from keras_transformer import Seq2SeqTransformer
    from keras_transformer.decoding import (
        build_beam_search, build_greedy_search, build_sampling_search
    )

    workdir = sys.argv[1]
    with open(f"{workdir}/config.json") as f:
        model = Seq2SeqTransformer(json.load(f))
    inputs = dict(np.load(f"{workdir}/inputs.npz"))
    model(inputs)
    model.load_weights(f"{workdir}/model.weights.h5")
    logits = keras.ops.convert_to_numpy(model(inputs))
    # Decoding step by step with this backend's cache writes and reads, to the last position.
    decoder_token_ids = inputs["decoder_token_ids"]
    encoder_outputs = model.encode(inputs["encoder_token_ids"])
    cache = model.initialize_cache(
        encoder_outputs, inputs["encoder_token_ids"], decoder_token_ids.shape[1]
    )
    steps = []
    for t in range(decoder_token_ids.shape[1]):
        step, cache = model.decode(decoder_token_ids[:, t : t + 1], cache, t)
        steps.append(keras.ops.convert_to_numpy(step))
    source = inputs["encoder_token_ids"]
    beam = build_beam_search(model, bos_id=2, eos_id=3, num_results=2, max_extra_length=4)
    beam_tokens, beam_scores = map(keras.ops.convert_to_numpy, beam(source))
    greedy = build_greedy_search(model, bos_id=2, eos_id=3, max_extra_length=4)
    greedy_tokens, greedy_scores = map(keras.ops.convert_to_numpy, greedy(source))
    sampling = build_sampling_search(model, bos_id=2, eos_id=3, **SAMPLING)
    sampling_tokens, sampling_scores = map(keras.ops.convert_to_numpy, sampling(source))
    np.savez(f"{workdir}/out.npz", logits=logits, steps=np.concatenate(steps, axis=1),
             beam_tokens=beam_tokens, beam_scores=beam_scores, greedy_tokens=greedy_tokens,
             greedy_scores=greedy_scores, sampling_tokens=sampling_tokens,
             sampling_scores=sampling_scores, backend=keras.backend.backend())
    """
)


@pytest.mark.parametrize("variant", [{}, {"normalize_first": True, "key_dim": 2, "value_dim": 6}])
def test_same_weights_same_logits_and_outputs_on_the_next_backend(tiny_config, tmp_path, variant):
    try:
        importlib.import_module(OTHER_BACKEND)
    except ImportError as error:
        if REQUIRE_ALL_BACKENDS:
            pytest.fail(f"KERAS_TRANSFORMER_REQUIRE_ALL_BACKENDS=1 but {error}")
        pytest.skip(f"{OTHER_BACKEND} is not installed: {error}")
    config = tiny_config.replace(**variant)
    model = Seq2SeqTransformer(config)
    rng = np.random.default_rng(0)
    inputs = {
        "encoder_token_ids": random_token_ids(rng, 3, 9, config.vocabulary_size),
        "decoder_token_ids": random_token_ids(rng, 3, 6, config.vocabulary_size),
    }
    logits = to_numpy(model(inputs))
    model.save_weights(tmp_path / "model.weights.h5")
    np.savez(tmp_path / "inputs.npz", **inputs)
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))

    env = {**os.environ, "KERAS_BACKEND": OTHER_BACKEND, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, "-c", f"SAMPLING = {SAMPLING!r}\n{SCRIPT}", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    other = np.load(tmp_path / "out.npz")
    assert str(other["backend"]) == OTHER_BACKEND
    np.testing.assert_allclose(other["logits"], logits, atol=1e-5)
    # Every cached step on the other backend matches this backend's full forward pass.
    np.testing.assert_allclose(other["steps"], logits, atol=1e-5)
    # Cached beam (4 beams, alpha 0.6, two results), greedy search and sampling (3 samples of
    # one seed): the same tokens.
    source = inputs["encoder_token_ids"]
    beam = build_beam_search(model, bos_id=BOS, eos_id=EOS, num_results=2, max_extra_length=4)
    greedy = build_greedy_search(model, bos_id=BOS, eos_id=EOS, max_extra_length=4)
    sampling = build_sampling_search(model, bos_id=BOS, eos_id=EOS, **SAMPLING)
    for name, search in (("beam", beam), ("greedy", greedy), ("sampling", sampling)):
        tokens, scores = map(to_numpy, search(source))
        assert (tokens[..., 0] != 0).any()  # some hypothesis is not empty
        np.testing.assert_array_equal(other[f"{name}_tokens"], tokens)
        np.testing.assert_allclose(other[f"{name}_scores"], scores, atol=1e-5)
