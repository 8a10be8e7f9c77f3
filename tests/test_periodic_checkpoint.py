import errno
import hashlib
import os
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, random_token_ids, to_numpy

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer
from keras_transformer.checkpoints import (
    PeriodicCheckpoint,
    UnreadableCheckpointError,
    periodic_checkpoint,
    read_training_state,
)
from keras_transformer.training import TrainingMonitor


def token_inputs(config, examples):
    rng = np.random.default_rng(0)
    return {
        "encoder_token_ids": random_token_ids(rng, examples, 5, config.vocabulary_size),
        "decoder_token_ids": random_token_ids(rng, examples, 4, config.vocabulary_size),
    }


def checkpoint_names(steps):
    return [f"ckpt-{s:08d}.weights.h5" for s in steps]


def train_two_per_step(config, steps, callbacks, accumulation=None, steps_per_execution=1):
    """Trains a fresh model on `steps` batches of 2 examples with `callbacks`; returns it."""
    inputs = token_inputs(config, 2 * steps)
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(config)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2, gradient_accumulation_steps=accumulation),
        loss=LabelSmoothedCrossEntropy(),
        steps_per_execution=steps_per_execution,
    )
    model.fit(
        inputs, inputs["decoder_token_ids"], batch_size=2, epochs=1, verbose=0, callbacks=callbacks
    )
    return model


class RecordDirectory(keras.callbacks.Callback):
    """Lists the checkpoint directory after every batch (runs after the checkpoint callback)."""

    def __init__(self, directory):
        super().__init__()
        self.directory = directory
        self.listings = []

    def on_train_batch_end(self, batch, logs=None):
        self.listings.append(sorted(os.listdir(self.directory)))


def test_checkpoints_every_n_steps_keep_last_k_and_average_at_end(one_layer_config, tmp_path):
    # Six steps, a save at each even one: keep=2 must delete step 2 at step 6.
    callback = PeriodicCheckpoint(
        tmp_path, every_steps=2, every_minutes=None, keep=2, average_last=2
    )
    record = RecordDirectory(tmp_path)
    model = train_two_per_step(one_layer_config, 6, [callback, record])
    callback.average_into(model)
    assert callback.saved == [str(tmp_path / name) for name in checkpoint_names((2, 4, 6))]
    # Pruning happens at each save, oldest first, not only at the end.
    after_each_step = [[], [2], [2], [2, 4], [2, 4], [4, 6]]
    assert record.listings == [checkpoint_names(steps) for steps in after_each_step]
    names = sorted(os.listdir(tmp_path))
    assert names == checkpoint_names((4, 6))

    def weights_of(name):
        fresh = Seq2SeqTransformer(one_layer_config)
        fresh.build()
        fresh.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LabelSmoothedCrossEntropy())
        fresh.load_weights(tmp_path / name)
        return [to_numpy(w) for w in fresh.weights]

    last_two = [weights_of(name) for name in names]
    for averaged, a, b in zip(model.weights, *last_two, strict=True):
        np.testing.assert_allclose(to_numpy(averaged), (a + b) / 2, rtol=1e-6, atol=1e-7)
    assert not np.allclose(last_two[0][0], last_two[1][0])


@BACKEND_INDEPENDENT  # the files written and read; restoring is in test_resume
def test_checkpoints_every_n_minutes_of_a_fake_clock(one_layer_config, tmp_path, monkeypatch):
    # Seconds each batch takes on the fake clock; with every_minutes=1 the saves fall where
    # 60 s have passed since the previous save (or since training began at t=0):
    # batch ends at t = 10, 60*, 160*, 180, 200, 220*, 420*, 425 (* 60 s or more since the last).
    durations = [10, 50, 100, 20, 20, 20, 200, 5]
    now = [0.0]
    # Only the callback's module sees the fake clock.
    monkeypatch.setattr(
        periodic_checkpoint, "time", types.SimpleNamespace(monotonic=lambda: now[0])
    )

    class Tick(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            now[0] += durations[batch]

    callback = PeriodicCheckpoint(
        tmp_path, every_steps=None, every_minutes=1, keep=10, average_last=None
    )
    record = RecordDirectory(tmp_path)
    train_two_per_step(one_layer_config, len(durations), [Tick(), callback, record])
    after_each_step = [[], [2], [2, 3], [2, 3], [2, 3], [2, 3, 6], [2, 3, 6, 7], [2, 3, 6, 7]]
    assert record.listings == [checkpoint_names(steps) for steps in after_each_step]
    # Training ends with a save of the final step.
    assert sorted(os.listdir(tmp_path)) == checkpoint_names((2, 3, 6, 7, 8))


@BACKEND_INDEPENDENT
def test_bad_schedule_arguments(tmp_path):
    with pytest.raises(ValueError, match="neither"):
        PeriodicCheckpoint(tmp_path, every_steps=None, every_minutes=None)
    with pytest.raises(ValueError, match="average_last"):
        PeriodicCheckpoint(tmp_path, every_steps=1, keep=2, average_last=3)


def weights_in(path, config, reader=None):
    """The weights saved in `path`, read into `reader` (a built model of `config`) or a new one."""
    if reader is None:
        reader = Seq2SeqTransformer(config)
        reader.build()
    reader.load_weights(path)
    return [np.array(to_numpy(w)) for w in reader.weights]  # copies: `reader` is reused


@pytest.mark.skipif(
    keras.backend.backend() == "torch",
    reason="Keras allows only steps_per_execution=1 on the PyTorch backend",
)
@pytest.mark.parametrize("accumulation", [None, 2])
def test_steps_per_execution_saves_and_logs_the_right_step(
    one_layer_config, tmp_path, accumulation
):
    # With steps_per_execution=3 Keras calls the callbacks after batches 3, 6, 9 and 12.
    # Counting one batch per call recorded steps 1-4 (data position 1-4) for weights
    # trained on 3-12 batches. Reference: the same training one batch per call.
    k = accumulation or 1
    reference = PeriodicCheckpoint(
        tmp_path / "reference", every_steps=1, every_minutes=None, keep=12, average_last=None
    )
    train_two_per_step(one_layer_config, 12, [reference], accumulation)
    checkpoint = PeriodicCheckpoint(
        tmp_path / "grouped", every_steps=2, every_minutes=None, keep=12, average_last=None
    )
    monitor = TrainingMonitor(tmp_path / "logs", every_steps=2)
    model = train_two_per_step(
        one_layer_config, 12, [monitor, checkpoint], accumulation, steps_per_execution=3
    )
    assert int(to_numpy(model.optimizer.iterations)) == 12 // k  # Keras' own update count
    # Each save at the first callback at or after a multiple of 2 steps, where no update is
    # half-done: batches 3 (step 3), 6, 9, 12 without accumulation; 6 (step 3), 12 with it.
    steps = [3, 6, 9, 12] if k == 1 else [3, 6]
    assert sorted(os.listdir(tmp_path / "grouped")) == checkpoint_names(steps)
    with open(tmp_path / "logs" / "train_log.csv") as file:
        assert [int(line.split(",")[0]) for line in file.readlines()[1:]] == steps
    reader = Seq2SeqTransformer(one_layer_config)
    reader.build()
    for step in steps:
        name = checkpoint_names([step])[0]
        assert read_training_state(str(tmp_path / "grouped" / name)) == k * step
        expected = weights_in(tmp_path / "reference" / name, one_layer_config, reader)
        grouped = weights_in(tmp_path / "grouped" / name, one_layer_config, reader)
        for got, want in zip(grouped, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def fill_the_disk_after(saves, monkeypatch):
    """Makes `save_weights` write `saves` whole files, then a few bytes and `ENOSPC`."""
    real_save_weights = keras.Model.save_weights
    calls = []

    def save_weights(model, filepath, *args, **kwargs):
        calls.append(filepath)
        if len(calls) <= saves:
            return real_save_weights(model, filepath, *args, **kwargs)
        with open(filepath, "wb") as partial:
            partial.write(b"\x89HDF\r\n\x1a\n")  # the start of an HDF5 file, then no space
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filepath)

    monkeypatch.setattr(keras.Model, "save_weights", save_weights)
    return calls


class RecordFileHashes(keras.callbacks.Callback):
    """The SHA-256 of every file in the directory after each batch."""

    def __init__(self, directory):
        super().__init__()
        self.directory = directory
        self.hashes = []

    def on_train_batch_end(self, batch, logs=None):
        self.hashes.append(
            {
                name: hashlib.sha256((self.directory / name).read_bytes()).hexdigest()
                for name in sorted(os.listdir(self.directory))
            }
        )


@BACKEND_INDEPENDENT
def test_a_full_disk_stops_training_and_keeps_every_checkpoint(
    one_layer_config, tmp_path, monkeypatch
):
    # keep=2: the failed third save must not prune step 1 to make room before it writes.
    callback = PeriodicCheckpoint(
        tmp_path, every_steps=1, every_minutes=None, keep=2, average_last=None
    )
    record = RecordFileHashes(tmp_path)
    calls = fill_the_disk_after(2, monkeypatch)
    third = tmp_path / checkpoint_names([3])[0]
    with pytest.raises(OSError) as raised:
        train_two_per_step(one_layer_config, 5, [callback, record])
    assert len(calls) == 3  # training stopped at the failed save, not later
    assert raised.value.errno == errno.ENOSPC
    message = str(raised.value)
    assert f"Could not write checkpoint {third}" in message
    assert "No space left on device" in message
    assert f"the last good one is {tmp_path / checkpoint_names([2])[0]}" in message
    assert sorted(os.listdir(tmp_path)) == checkpoint_names((1, 2))  # no temporary file left
    after = RecordFileHashes(tmp_path)
    after.on_train_batch_end(None)
    assert after.hashes[0] == record.hashes[-1]  # both files byte for byte as written

    monkeypatch.undo()
    model = Seq2SeqTransformer(one_layer_config)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LabelSmoothedCrossEntropy())
    assert PeriodicCheckpoint(tmp_path, every_steps=1).restore(model) == 2


@BACKEND_INDEPENDENT
def test_unfinished_writes_of_killed_runs_are_removed_and_counted(
    one_layer_config, tmp_path, capsys
):
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = int(finished.stdout)
    left_by_the_killed_run = f".ckpt-00000007.weights.h5.{dead}-0123abcd.weights.h5"
    kept = [
        f".ckpt-00000008.weights.h5.{os.getpid()}-0123abcd.weights.h5",  # a live writer's
        f".averaged.weights.h5.{dead}-0123abcd.weights.h5",  # not a periodic checkpoint
        ".ckpt-notes.txt",  # the user's own file
    ]
    for name in [left_by_the_killed_run, *kept]:
        (tmp_path / name).write_bytes(b"partial")
    callback = PeriodicCheckpoint(tmp_path, every_steps=1, every_minutes=None, average_last=None)
    train_two_per_step(one_layer_config, 1, [callback])
    assert sorted(os.listdir(tmp_path)) == sorted([*kept, *checkpoint_names([1])])
    captured = capsys.readouterr()
    assert captured.out == ""  # messages go to stderr
    assert (
        f"Removed 1 unfinished checkpoint write(s) of killed runs: {left_by_the_killed_run}"
        in captured.err
    )


@BACKEND_INDEPENDENT
def test_a_truncated_checkpoint_is_set_aside_and_its_step_rewritten(one_layer_config, tmp_path):
    # Run 1 saved steps 1 and 2; step 2's file was then truncated (a crash of the disk,
    # not of our write). Run 2 resumes from step 1, ends at step 2, writes step 2 again
    # and averages it with step 1.
    first = PeriodicCheckpoint(
        tmp_path, every_steps=1, every_minutes=None, keep=5, average_last=None
    )
    train_two_per_step(one_layer_config, 2, [first])
    broken = tmp_path / checkpoint_names([2])[0]
    broken.write_bytes(broken.read_bytes()[:1000])
    inputs = token_inputs(one_layer_config, 2)
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(one_layer_config)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LabelSmoothedCrossEntropy())
    second = PeriodicCheckpoint(
        tmp_path, every_steps=1000, every_minutes=None, keep=5, average_last=2
    )
    assert second.restore(model) == 1
    # Set aside, not deleted, so that averaging or pruning never reads it as a checkpoint.
    assert (tmp_path / (broken.name + ".unreadable")).stat().st_size == 1000
    model.fit(inputs, inputs["decoder_token_ids"], batch_size=2, epochs=1, verbose=0,
              callbacks=[second])  # fmt: skip
    second.average_into(model)
    assert read_training_state(str(broken)) == 2  # readable again
    for averaged, a, b in zip(
        model.weights,
        weights_in(tmp_path / checkpoint_names([1])[0], one_layer_config),
        weights_in(broken, one_layer_config),
        strict=True,
    ):
        np.testing.assert_allclose(to_numpy(averaged), (a + b) / 2, rtol=1e-6, atol=1e-7)


@BACKEND_INDEPENDENT
def test_a_checkpoint_whose_data_changed_fails_its_checksum_and_the_previous_is_used(
    one_layer_config, tmp_path, capsys
):
    import h5py

    first = PeriodicCheckpoint(
        tmp_path, every_steps=1, every_minutes=None, keep=5, average_last=None
    )
    train_two_per_step(one_layer_config, 2, [first])
    changed = tmp_path / checkpoint_names([2])[0]
    # A valid HDF5 file whose data was overwritten in place: one weight changes.
    with h5py.File(changed, "r+") as file:
        names = []
        file.visititems(lambda n, item: names.append(n) if isinstance(item, h5py.Dataset) else None)
        kernel = next(n for n in names if n.startswith("layers/") and file[n].ndim == 2)
        data = file[kernel][()]
        data[0, 0] += 1.0
        file[kernel][...] = data
    with pytest.raises(UnreadableCheckpointError, match="SHA-256"):
        read_training_state(str(changed))
    model = Seq2SeqTransformer(one_layer_config)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=LabelSmoothedCrossEntropy())
    assert PeriodicCheckpoint(tmp_path, every_steps=1).restore(model) == 1
    assert "fails its SHA-256 check" in capsys.readouterr().err
    assert (tmp_path / (changed.name + ".unreadable")).exists()
    for restored, saved in zip(
        model.weights,
        weights_in(tmp_path / checkpoint_names([1])[0], one_layer_config),
        strict=True,
    ):
        np.testing.assert_array_equal(to_numpy(restored), saved)
