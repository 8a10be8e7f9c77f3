import errno
import hashlib
import json
import os
import shutil

import h5py
import keras
import numpy as np
import pytest
from conftest import small_config, to_numpy

from keras_transformer import Seq2SeqTransformer
from keras_transformer.checkpoints import (
    average_checkpoints,
    checkpoint_step,
    checkpoint_variables,
    latest_checkpoints,
    save_weights_atomic,
)
from keras_transformer.commands.average import main

CONFIG = small_config(23, d_model=8, intermediate_dim=16)


def make_model(seed, config=CONFIG, optimizer_steps=0):
    """A built model; with `optimizer_steps`, compiled with Adam state from random gradients."""
    keras.utils.set_random_seed(seed)
    model = Seq2SeqTransformer(config)
    model.build()
    if optimizer_steps:
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
        rng = np.random.default_rng(seed)
        for _ in range(optimizer_steps):
            gradients = [  # tensors: torch's optimizers take no numpy arrays
                keras.ops.convert_to_tensor(rng.normal(size=v.shape).astype("float32"))
                for v in model.trainable_weights
            ]
            model.optimizer.apply_gradients(zip(gradients, model.trainable_weights, strict=True))
    return model


def values(variables):
    return [to_numpy(v) for v in variables]


def file_state(path):
    with open(path, "rb") as file:
        digest = hashlib.sha256(file.read()).hexdigest()
    return os.stat(path).st_mtime_ns, digest


def test_averaging_copies_of_one_checkpoint_gives_it_back_exactly(tmp_path):
    source = make_model(seed=1, optimizer_steps=2)
    paths = [str(tmp_path / "a.weights.h5"), str(tmp_path / "b.weights.h5")]
    for path in paths:
        source.save_weights(path)
    paths.append(str(tmp_path / "c.keras"))
    source.save(paths[-1])
    target = make_model(seed=2)
    # 5 sources: float32 sums of 5 equal values would round (5 * x / 5 != x).
    average_checkpoints(target, paths + paths[:2])
    for expected, actual in zip(values(source.weights), values(target.weights), strict=True):
        np.testing.assert_array_equal(actual, expected)


def test_averaging_two_checkpoints_gives_their_mean(tmp_path):
    first, second = make_model(seed=1), make_model(seed=2)
    paths = [str(tmp_path / "ckpt-1.weights.h5"), str(tmp_path / "ckpt-2.keras")]
    first.save_weights(paths[0])
    second.save(paths[1])
    before = [file_state(path) for path in paths]
    target = average_checkpoints(make_model(seed=3), paths)
    for a, b, actual in zip(
        values(first.weights), values(second.weights), values(target.weights), strict=True
    ):
        np.testing.assert_allclose(actual, (a.astype("float64") + b) / 2, rtol=1e-7, atol=0)
    assert [file_state(path) for path in paths] == before  # only read


def test_half_precision_weights_are_averaged_in_wide_precision(tmp_path):
    keras.config.set_dtype_policy("bfloat16")  # the conftest fixture restores the policy
    first, second = make_model(seed=1), make_model(seed=2)
    first.save_weights(tmp_path / "a.weights.h5")
    second.save_weights(tmp_path / "b.weights.h5")
    target = make_model(seed=3)
    average_checkpoints(target, [tmp_path / "a.weights.h5", tmp_path / "b.weights.h5"])
    for a, b, actual in zip(
        values(first.weights), values(second.weights), values(target.weights), strict=True
    ):
        assert actual.dtype == a.dtype  # bfloat16
        # The mean of two bfloat16 values is exact in float32; one rounding back.
        expected = ((a.astype("float32") + b.astype("float32")) / 2).astype(a.dtype)
        np.testing.assert_array_equal(actual, expected)


def test_optimizer_state_is_untouched(tmp_path):
    # The files hold optimizer state too (save_weights of compiled models) and differ from
    # the target's: none of it may be loaded.
    for seed in (1, 2):
        make_model(seed=seed, optimizer_steps=3).save_weights(tmp_path / f"{seed}.weights.h5")
    assert any(name.startswith("optimizer/") for name in _h5_names(tmp_path / "1.weights.h5"))
    target = make_model(seed=3, optimizer_steps=1)
    optimizer_before = values(target.optimizer.variables)
    weights_before = values(target.weights)
    average_checkpoints(target, [tmp_path / "1.weights.h5", tmp_path / "2.weights.h5"])
    assert int(to_numpy(target.optimizer.iterations)) == 1
    for expected, actual in zip(optimizer_before, values(target.optimizer.variables), strict=True):
        np.testing.assert_array_equal(actual, expected)
    assert not np.array_equal(values(target.weights)[0], weights_before[0])


def _h5_names(path):
    names = []
    with h5py.File(path, "r") as file:
        file.visit(names.append)
    return names


def test_mismatched_checkpoints_name_the_file_and_variable(tmp_path):
    reference = str(tmp_path / "ok.weights.h5")
    make_model(seed=1).save_weights(reference)
    wider = str(tmp_path / "wider.weights.h5")
    make_model(seed=1, config=CONFIG.replace(intermediate_dim=24)).save_weights(wider)
    deeper = str(tmp_path / "deeper.weights.h5")
    make_model(seed=1, config=CONFIG.replace(num_layers=2)).save_weights(deeper)
    target = make_model(seed=3)
    before = values(target.weights)

    with pytest.raises(ValueError) as error:
        average_checkpoints(target, [reference, wider])
    message = str(error.value)
    assert wider in message and reference in message
    assert "feed_forward/inner_dense/vars/0' has shape (8, 24)" in message
    assert "(8, 16) in" in message

    with pytest.raises(ValueError, match="has the variable 'decoder_blocks/transformer_decoder"):
        average_checkpoints(target, [reference, deeper])
    with pytest.raises(
        ValueError, match=r"ok\.weights\.h5 lacks the variable 'decoder_blocks/\w+_1/"
    ):
        average_checkpoints(target, [deeper, reference])
    # Consistent checkpoints of another architecture than the model's.
    with pytest.raises(ValueError, match=rf"Checkpoint {wider} does not fit the model"):
        average_checkpoints(target, [wider, wider])
    for expected, actual in zip(before, values(target.weights), strict=True):
        np.testing.assert_array_equal(actual, expected)  # left as it was

    with pytest.raises(TypeError, match="not a single path"):
        average_checkpoints(target, reference)
    with pytest.raises(FileNotFoundError, match=r"missing\.weights\.h5"):
        average_checkpoints(target, [tmp_path / "missing.weights.h5"])
    assert checkpoint_variables(reference)["layers/token_embedding/vars/0"] == (23, 8)


def test_latest_checkpoints_orders_by_step(tmp_path):
    for name in ("ckpt-9", "ckpt-10", "ckpt-100", "ckpt-2", "best"):
        (tmp_path / f"{name}.weights.h5").touch()
    (tmp_path / "ckpt-200.keras").touch()
    assert checkpoint_step("run3/ckpt-000123.weights.h5") == 123
    assert checkpoint_step("best.weights.h5") is None
    found = latest_checkpoints(tmp_path, 3)
    assert [os.path.basename(p) for p in found] == [
        "ckpt-9.weights.h5",
        "ckpt-10.weights.h5",
        "ckpt-100.weights.h5",
    ]
    assert latest_checkpoints(tmp_path, 1, pattern="*.keras") == [str(tmp_path / "ckpt-200.keras")]
    with pytest.raises(ValueError, match=r"last 5 checkpoints .* there are 4 \(found: ckpt-2"):
        latest_checkpoints(tmp_path, 5)
    (tmp_path / "ckpt-010.weights.h5").touch()
    with pytest.raises(ValueError, match="Two checkpoints of step 10"):
        latest_checkpoints(tmp_path, 2)
    with pytest.raises(ValueError, match=r"`n` must be a positive int\. Received: n=0"):
        latest_checkpoints(tmp_path, 0)


@pytest.mark.parametrize("suffix", [".weights.h5", ".keras"])
def test_save_weights_atomic(tmp_path, suffix):
    model = make_model(seed=1)
    path = tmp_path / f"averaged{suffix}"
    path.write_bytes(b"an older file")
    assert save_weights_atomic(model, path) == str(path)
    assert os.listdir(tmp_path) == [path.name]  # no temporary file left behind
    restored = make_model(seed=2)
    restored.load_weights(path)
    for expected, actual in zip(values(model.weights), values(restored.weights), strict=True):
        np.testing.assert_array_equal(actual, expected)
    with pytest.raises(ValueError, match="must end with one of"):
        save_weights_atomic(model, tmp_path / "averaged.h5")


@pytest.mark.parametrize("suffix", [".weights.h5", ".keras"])
def test_save_weights_atomic_interrupted_leaves_the_older_file(tmp_path, suffix, monkeypatch):
    model = make_model(seed=1)
    path = tmp_path / f"averaged{suffix}"
    path.write_bytes(b"an older file")
    written = []

    def write_then_fail(filepath, *args, **kwargs):
        written.append(filepath)
        with open(filepath, "wb") as partial:
            partial.write(b"PK\x03\x04" if suffix == ".keras" else b"\x89HDF\r\n\x1a\n")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filepath)

    monkeypatch.setattr(model, "save" if suffix == ".keras" else "save_weights", write_then_fail)
    with pytest.raises(OSError, match="No space left on device"):
        save_weights_atomic(model, path)
    assert len(written) == 1 and os.path.dirname(written[0]) == str(tmp_path)
    assert written[0] != str(path)  # Keras wrote to a temporary name...
    assert os.listdir(tmp_path) == [path.name]  # ...which is gone,
    assert path.read_bytes() == b"an older file"  # and the older file is untouched.


def test_save_weights_atomic_checks_free_space_first(tmp_path, monkeypatch):
    from keras_transformer.checkpoints import checkpoint_files

    model = make_model(seed=1, optimizer_steps=1)
    written = tmp_path / "written.weights.h5"
    save_weights_atomic(model, written)
    estimate = checkpoint_files._bytes_to_write(model)
    # An upper bound of the real size, by at most HDF5's overhead allowance.
    assert os.path.getsize(written) <= estimate <= os.path.getsize(written) + 2**20

    path = tmp_path / "averaged.weights.h5"
    path.write_bytes(b"an older file")
    real_disk_usage = shutil.disk_usage
    free = {"bytes": estimate - 1}
    monkeypatch.setattr(
        checkpoint_files.shutil,
        "disk_usage",
        lambda directory: real_disk_usage(directory)._replace(free=free["bytes"]),
    )
    with pytest.raises(OSError, match=f"Not enough free space to write {path}: about") as raised:
        save_weights_atomic(model, path)
    assert raised.value.errno == errno.ENOSPC
    assert sorted(os.listdir(tmp_path)) == [path.name, written.name]
    assert path.read_bytes() == b"an older file"
    free["bytes"] = estimate
    save_weights_atomic(model, path)
    assert path.read_bytes() == written.read_bytes()


def test_command_averages_a_directory(tmp_path, capsys):
    for step, seed in ((1, 1), (2, 2), (3, 3)):
        make_model(seed=seed).save_weights(tmp_path / f"ckpt-{step:06d}.weights.h5")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG.to_dict()))
    output = tmp_path / "averaged.weights.h5"
    argv = ["--directory", str(tmp_path), "--last", "2", "--config", str(config)]
    assert main([*argv, "--output", str(output)]) == 0
    captured = capsys.readouterr()
    assert "Averaged 2 checkpoints" in captured.err and captured.out == ""  # messages, not data
    averaged = make_model(seed=4)
    averaged.load_weights(output)
    expected = average_checkpoints(
        make_model(seed=5),
        [tmp_path / "ckpt-000002.weights.h5", tmp_path / "ckpt-000003.weights.h5"],
    )
    for e, a in zip(values(expected.weights), values(averaged.weights), strict=True):
        np.testing.assert_array_equal(a, e)

    with pytest.raises(SystemExit) as exit_info:
        main([*argv[:4], "--output", str(output)])  # no model config
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(SystemExit) as exit_info:
        main(["--preset", "base", "--directory", str(tmp_path), "--output", str(output)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "keras-transformer average: error: --preset needs --vocabulary-size (see --help)\n"
    )
