"""Fault-tolerant training: kill -9, resume at the exact step and data position.

A script trains a small model with dropout, gradient accumulation and the paper's
schedule, writing a checkpoint every 2 updates and a per-step loss log. Killed with
SIGKILL mid-run and started again, it must continue the uninterrupted run's loss and
learning-rate curves step for step.
"""

import csv
import os
import signal
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import pytest
from conftest import small_config

from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer
from keras_transformer.checkpoints import (
    PeriodicCheckpoint,
    UnreadableCheckpointError,
    latest_checkpoints,
    read_training_state,
)
from keras_transformer.training import paper_optimizer

TOTAL_STEPS = 12
ACCUMULATION = 2

SCRIPT = textwrap.dedent(
    """
    import sys, time
    import keras
    import numpy as np
    from keras_transformer import LabelSmoothedCrossEntropy, Seq2SeqTransformer, TransformerConfig
    from keras_transformer.checkpoints import PeriodicCheckpoint
    from keras_transformer.data import TokenizedCorpus, make_translation_dataset
    from keras_transformer.training import TrainingMonitor, paper_optimizer

    run_dir, total_steps, accumulation, pause, every = sys.argv[1:6]
    total_steps, accumulation, pause = int(total_steps), int(accumulation), float(pause)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 14, size=(2, 200))
    corpus = TokenizedCorpus.from_ids(
        [list(rng.integers(4, 40, n)) for n in lengths[0]],
        [list(rng.integers(4, 40, n)) for n in lengths[1]],
    )
    keras.utils.set_random_seed(1)
    model = Seq2SeqTransformer(TransformerConfig(
        vocabulary_size=40, num_layers=1, d_model=16, num_heads=2, intermediate_dim=32,
        dropout=0.1))
    model.compile(
        optimizer=paper_optimizer(16, warmup_steps=4, accumulation_steps=accumulation),
        loss=LabelSmoothedCrossEntropy(reduction="sum"))
    checkpoint = PeriodicCheckpoint(run_dir + "/checkpoints", every_steps=int(every),
                                    every_minutes=None, keep=3, average_last=None)
    start = checkpoint.restore(model)
    # Growth 2: two bucket shapes (8 and 16), so each run compiles two steps.
    train = make_translation_dataset(corpus, token_budget=96, max_length=16, start_step=start,
                                     accumulation_steps=accumulation, bucket_growth=2.0)

    class Pause(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(pause)

    steps_per_epoch = 5
    monitor = TrainingMonitor(run_dir, every_steps=1, max_steps=total_steps, start_step=start,
                              tokens_per_batch=train.summary.target_tokens / train.steps_per_epoch)
    model.fit(train.dataset, steps_per_epoch=steps_per_epoch, epochs=1000,
              initial_epoch=start // steps_per_epoch, verbose=0,
              callbacks=[Pause(), monitor, checkpoint])
    print("FINISHED", start)
    """
)


def run_script(run_dir, pause=0.0, wait=True, every=2):
    command = [sys.executable, "-c", SCRIPT, str(run_dir), str(TOTAL_STEPS), str(ACCUMULATION)]
    # On JAX the three runs share one persistent compilation cache (beside the run folders),
    # as a resumed recipe run does: the second and third load the steps the first compiled.
    # A cached program is the same program, so the curves are compared as strictly.
    cache = os.path.join(os.path.dirname(run_dir), "jax_cache")
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "JAX_COMPILATION_CACHE_DIR": cache,
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    }
    process = subprocess.Popen(
        [*command, str(pause), str(every)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if not wait:
        return process
    try:
        out, err = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 0, err[-3000:]
    return out


def run_in_this_process(run_dir):
    """The script's uninterrupted run in the test's own process: one process start fewer."""
    arguments = sys.argv
    sys.argv = ["resume_script", str(run_dir), str(TOTAL_STEPS), str(ACCUMULATION), "0", "2"]
    try:
        exec(compile(SCRIPT, "resume_script", "exec"), {"__name__": "__main__"})
    finally:
        sys.argv = arguments


def curve(run_dir):
    """{step: (loss, learning rate)} from the log; a resumed run's rows replace older ones."""
    rows = {}
    with open(os.path.join(run_dir, "train_log.csv")) as file:
        for row in csv.DictReader(file):
            rows[int(row["step"])] = (float(row["loss"]), float(row["learning_rate"]))
    return rows


def logged_steps(run_dir):
    path = os.path.join(run_dir, "train_log.csv")
    if not os.path.exists(path):
        return 0
    with open(path) as file:
        return len(file.readlines()) - 1


def test_kill_9_and_resume_continue_the_uninterrupted_curve(tmp_path):
    reference_dir, interrupted_dir = tmp_path / "reference", tmp_path / "interrupted"
    run_in_this_process(reference_dir)
    reference = curve(reference_dir)
    assert sorted(reference) == list(range(1, TOTAL_STEPS + 1))

    process = run_script(interrupted_dir, pause=0.4, wait=False)
    try:
        deadline = time.monotonic() + 240
        while logged_steps(interrupted_dir) < 5:  # checkpoints of steps 2 and 4 are written
            assert process.poll() is None, process.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the training script made no progress"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        process.kill()
        process.communicate()
    killed_at = logged_steps(interrupted_dir)
    assert killed_at < TOTAL_STEPS
    saved = latest_checkpoints(interrupted_dir / "checkpoints", 1)[0]
    resumed_from = read_training_state(saved)  # batches
    assert resumed_from == ACCUMULATION * int(saved.split("-")[-1].split(".")[0])

    out = run_script(interrupted_dir)
    assert f"FINISHED {resumed_from}" in out
    resumed = curve(interrupted_dir)
    assert sorted(resumed) == list(range(1, TOTAL_STEPS + 1))
    for step in range(1, TOTAL_STEPS + 1):
        np.testing.assert_allclose(resumed[step], reference[step], rtol=1e-5, err_msg=f"{step}")
    # The curve moves, so equal values are not an accident.
    losses = [reference[step][0] for step in reference]
    assert max(losses) - min(losses) > 1e-3


def test_sigterm_saves_the_update_in_progress_and_exits_143(tmp_path):
    run_dir = tmp_path / "preempted"
    # No periodic checkpoint before the signal: the one on disk must come from it.
    process = run_script(run_dir, pause=0.4, wait=False, every=1000)
    try:
        deadline = time.monotonic() + 240
        while logged_steps(run_dir) < 3:
            assert process.poll() is None, process.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the training script made no progress"
            time.sleep(0.05)
        signalled_at = logged_steps(run_dir)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 143, err[-3000:]
    stopped_at = logged_steps(run_dir)
    # It finished the update in progress (one more at most, if a batch had just ended),
    # and did not train on: 12 steps take 10 s.
    assert signalled_at <= stopped_at <= signalled_at + 2 < TOTAL_STEPS
    checkpoints = run_dir / "checkpoints"
    saved = str(checkpoints / f"ckpt-{stopped_at:08d}.weights.h5")
    assert os.listdir(checkpoints) == [os.path.basename(saved)]
    assert read_training_state(saved) == ACCUMULATION * stopped_at
    # A message, not data: on stderr.
    assert f"SIGTERM received: stopped after step {stopped_at}; last checkpoint: {saved}" in err
    assert "FINISHED" not in out


def test_sigterm_goes_to_the_programs_own_handler_after_the_save(tmp_path):
    caught = []

    def own_handler(signum, frame):
        caught.append(signum)

    class SendSigtermAfterBatch(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                os.kill(os.getpid(), signal.SIGTERM)

    model = compiled_model()
    ids = np.random.default_rng(0).integers(4, 40, size=(12, 6)).astype("int32")
    checkpoint = PeriodicCheckpoint(tmp_path, every_steps=1000, every_minutes=None, keep=3,
                                    average_last=None)  # fmt: skip
    previous = signal.signal(signal.SIGTERM, own_handler)
    try:
        model.fit({"encoder_token_ids": ids, "decoder_token_ids": ids}, ids, batch_size=2,
                  epochs=1, verbose=0, callbacks=[SendSigtermAfterBatch(), checkpoint])  # fmt: skip
        assert signal.getsignal(signal.SIGTERM) is own_handler  # given back
    finally:
        signal.signal(signal.SIGTERM, previous)
    # Held until the batch ended, saved, then handed on once; the handler returned, so
    # training went on to its end (6 batches), where the final checkpoint was written.
    assert caught == [signal.SIGTERM]
    assert sorted(os.listdir(tmp_path)) == [f"ckpt-{s:08d}.weights.h5" for s in (3, 6)]
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 6


def test_sigterm_during_validation_stops_there(tmp_path):
    # Validation runs after the epoch's last update: the signal is acted on during it,
    # not after the next epoch's first batch.
    validation_batches = []

    class SendSigtermInValidation(keras.callbacks.Callback):
        def on_test_batch_end(self, batch, logs=None):
            validation_batches.append(batch)
            if batch == 1:
                os.kill(os.getpid(), signal.SIGTERM)

    model = compiled_model()
    ids = np.random.default_rng(0).integers(4, 40, size=(6, 6)).astype("int32")
    inputs = {"encoder_token_ids": ids, "decoder_token_ids": ids}
    checkpoint = PeriodicCheckpoint(tmp_path, every_steps=1000, every_minutes=None, keep=3,
                                    average_last=None)  # fmt: skip
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        model.fit(inputs, ids, batch_size=2, epochs=3, verbose=0, validation_data=(inputs, ids),
                  validation_batch_size=1,
                  callbacks=[SendSigtermInValidation(), checkpoint])  # fmt: skip
    assert stopped.value.code == 143
    assert validation_batches == [0, 1]  # of 6
    assert signal.getsignal(signal.SIGTERM) is previous
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 3  # one epoch
    assert os.listdir(tmp_path) == ["ckpt-00000003.weights.h5"]
    assert read_training_state(str(tmp_path / "ckpt-00000003.weights.h5")) == 3


def compiled_model():
    keras.utils.set_random_seed(1)
    model = Seq2SeqTransformer(small_config(40, dropout=0.1))
    model.compile(optimizer=paper_optimizer(16, warmup_steps=4), loss=LabelSmoothedCrossEntropy())
    return model


def train_with_checkpoints(directory, steps):
    model = compiled_model()
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 40, size=(steps * 2, 6)).astype("int32")
    inputs = {"encoder_token_ids": ids, "decoder_token_ids": ids}
    checkpoint = PeriodicCheckpoint(
        directory, every_steps=1, every_minutes=None, keep=3, average_last=None
    )
    model.fit(inputs, ids, batch_size=2, epochs=1, verbose=0, callbacks=[checkpoint])
    return model


def test_truncated_checkpoint_is_reported_and_the_previous_one_used(tmp_path, capsys):
    train_with_checkpoints(tmp_path, steps=4)
    paths = latest_checkpoints(tmp_path, 3)
    newest, previous = paths[-1], paths[-2]
    with open(newest, "r+b") as file:
        file.truncate(os.path.getsize(newest) // 2)
    with pytest.raises(UnreadableCheckpointError, match=os.path.basename(newest)):
        read_training_state(newest)

    model = compiled_model()
    batches = PeriodicCheckpoint(tmp_path, every_steps=1).restore(model)
    assert batches == 3 == read_training_state(previous)
    assert os.path.basename(newest) in capsys.readouterr().err
    expected = compiled_model()
    expected.build()
    expected.load_weights(previous)
    for got, want in zip(model.weights, expected.weights, strict=True):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(want)
        )
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 3


def test_every_checkpoint_unreadable_is_an_error(tmp_path):
    train_with_checkpoints(tmp_path, steps=2)
    for path in latest_checkpoints(tmp_path, 2):
        with open(path, "r+b") as file:
            file.truncate(100)
    with pytest.raises(UnreadableCheckpointError, match="No readable checkpoint"):
        PeriodicCheckpoint(tmp_path, every_steps=1).restore(compiled_model())


def test_non_finite_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
    model = compiled_model()
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 40, size=(8, 6)).astype("int32")
    inputs = {"encoder_token_ids": ids, "decoder_token_ids": ids}

    class PoisonAfter(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:  # after step 2: the next step computes NaN
                embedding = self.model.weights[0]
                embedding.assign(np.full(embedding.shape, np.nan, "float32"))

    checkpoint = PeriodicCheckpoint(
        tmp_path, every_steps=1, every_minutes=None, keep=5, average_last=2
    )
    with pytest.raises(FloatingPointError, match="ckpt-00000002"):
        model.fit(inputs, ids, batch_size=2, epochs=1, verbose=0,
                  callbacks=[checkpoint, PoisonAfter()])  # fmt: skip
    names = sorted(os.listdir(tmp_path))
    assert names == ["ckpt-00000001.weights.h5", "ckpt-00000002.weights.h5"]
    restored = compiled_model()
    assert PeriodicCheckpoint(tmp_path, every_steps=1).restore(restored) == 2
    assert all(np.isfinite(keras.ops.convert_to_numpy(w)).all() for w in restored.weights)


def test_data_position_counts_batches_skipped_by_loss_scaling(tmp_path):
    keras.config.set_dtype_policy("mixed_float16")
    model = compiled_model()
    model.compile(
        optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), 2.0**32),
        loss=LabelSmoothedCrossEntropy(),
    )
    ids = np.random.default_rng(0).integers(4, 40, size=(8, 6)).astype("int32")
    inputs = {"encoder_token_ids": ids, "decoder_token_ids": ids}
    checkpoint = PeriodicCheckpoint(
        tmp_path, every_steps=2, every_minutes=None, keep=5, average_last=None
    )
    model.fit(inputs, ids, batch_size=2, epochs=1, verbose=0, callbacks=[checkpoint])
    # Overflowing steps were skipped, so the optimizer counted fewer than 4 batches.
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) < 4
    assert read_training_state(latest_checkpoints(tmp_path, 1)[0]) == 4


def test_restored_state_draws_the_same_dropout_masks_as_at_the_save(tmp_path):
    # Whatever the masks come from (the seed generators' variables, or on torch the global
    # generator Keras' dropout draws from), the step after a restore drops what the step
    # after the save did, and a step without the restore drops something else.
    from keras_transformer.checkpoints import restore_training_state, save_training_state

    model = compiled_model()
    ids = np.random.default_rng(0).integers(4, 40, size=(2, 6)).astype("int32")
    inputs = {"encoder_token_ids": ids, "decoder_token_ids": ids}
    model.build()
    path = str(tmp_path / "ckpt-00000000.weights.h5")
    save_training_state(model, path)

    def forward():
        return keras.ops.convert_to_numpy(model(inputs, training=True))

    after_save, next_step = forward(), forward()
    assert not np.array_equal(after_save, next_step)
    restore_training_state(model, path)
    np.testing.assert_array_equal(forward(), after_save)
