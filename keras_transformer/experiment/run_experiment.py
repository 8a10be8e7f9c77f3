"""One training run end to end: data, vocabulary, fit, averaging, test scores, export."""

import contextlib
import dataclasses
import json
import logging
import math
import os
import sys
import time

import keras

from keras_transformer.checkpoints import (
    PeriodicCheckpoint,
    average_checkpoints,
)
from keras_transformer.data import make_translation_dataset
from keras_transformer.evaluation import ValidationCallback, score_files
from keras_transformer.experiment.data_order_settings import check_data_order_settings
from keras_transformer.experiment.experiment_config import ExperimentConfig
from keras_transformer.experiment.experiment_result import ExperimentResult
from keras_transformer.experiment.keras_distribute_workarounds import (
    apply_distribute_workarounds,
)
from keras_transformer.experiment.output_dir_lock import OutputDirLock
from keras_transformer.experiment.run_config_file import (
    check_resumed_settings,
    run_settings,
    write_run_config,
)
from keras_transformer.experiment.run_distribution import RunDistribution
from keras_transformer.experiment.valid_split import (
    check_files,
    check_valid_settings,
    config_translator,
    score_valid_split,
    select_on_valid,
    split_paths,
    validation_callback,
)
from keras_transformer.export import export_saved_model, save_translation_model
from keras_transformer.models import Seq2SeqTransformer, get_preset
from keras_transformer.text import (
    ParallelCorpus,
    SubwordTokenizer,
    load_tfds_corpus,
    read_lines,
    train_vocabulary,
    write_synthetic_corpus,
)
from keras_transformer.text.text_files import (
    atomic_output,
    join_line_breaks,
    write_lines_atomic,
)
from keras_transformer.training import LabelSmoothedCrossEntropy, TrainingMonitor, paper_optimizer

logger = logging.getLogger("keras_transformer.experiment")
# Test sentences printed with their translations, and translated by the SavedModel.
NUM_EXAMPLES = 3
# Subfolder of the output directory for JAX's compiled programs.
XLA_CACHE = "xla_cache"


def _prepare_output_dir(path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise OSError(f"Cannot create the output directory {path}: {error.strerror}") from error
    if not os.access(path, os.W_OK):
        raise PermissionError(f"The output directory {path} is not writable.")


@contextlib.contextmanager
def _keep_jax_compilations(output_dir):
    """On JAX, caches compiled programs in `{output_dir}/xla_cache` during the run.

    JAX's persistent cache: a resumed run loads each bucket shape's training step
    instead of compiling it again. A cache directory the user set
    (`JAX_COMPILATION_CACHE_DIR`) is left as it is.
    """
    if keras.backend.backend() != "jax":
        yield
        return
    import jax

    if jax.config.jax_compilation_cache_dir is not None:
        yield
        return
    jax.config.update("jax_compilation_cache_dir", os.path.join(output_dir, XLA_CACHE))
    try:
        yield
    finally:
        jax.config.update("jax_compilation_cache_dir", None)


def _data_dir(config, output_dir):
    if config.data_dir is not None or config.tfds_name is not None:
        return config.data_dir
    data_dir = os.path.join(output_dir, "data")
    if not os.path.exists(os.path.join(data_dir, f"train.{config.source_language}")):
        train, valid, test = config.synthetic_sizes
        write_synthetic_corpus(
            data_dir, train_size=train, valid_size=valid, test_size=test, seed=config.seed
        )
    return data_dir


def _training_corpus(config, data_dir):
    if config.tfds_name is not None:
        return load_tfds_corpus(
            config.tfds_name,
            split=config.train_split,
            source_language=config.source_language,
            target_language=config.target_language,
        )
    paths = split_paths(config, config.train_split, data_dir)
    check_files(paths, "training")
    return ParallelCorpus.from_files(*paths)


def _tokenizer(config, corpus, output_dir):
    path = os.path.join(output_dir, "vocabulary.model")
    if os.path.exists(path):  # a resumed run keeps its vocabulary
        with open(path, "rb") as file:
            tokenizer = SubwordTokenizer(proto=file.read())
        if tokenizer.vocabulary_size() != config.vocabulary_size:
            raise ValueError(
                f"{path} (from an earlier run in this output directory) has "
                f"{tokenizer.vocabulary_size()} pieces, but vocabulary_size="
                f"{config.vocabulary_size} was asked for: use another --output-dir."
            )
        return tokenizer
    return train_vocabulary(
        corpus,
        vocabulary_size=config.vocabulary_size,
        model_type=config.vocabulary_type,
        seed=config.seed,
        output_path=path,
    )


def run_experiment(config, command_line=None):
    """Trains, averages, scores and exports one model as `config` describes.

    Paper sections: 5.1 (shared vocabulary, token-budget batches), 5.2-5.4
    (steps, Adam with the warmup schedule, dropout, label smoothing), 6.1
    (checkpoint averaging, beam 4, alpha 0.6, max length input + 50). A run
    interrupted for any reason continues where it stopped when started
    again with the same `output_dir` (checkpoints hold the data position) and
    the same model and data settings (checked against `config.json` and
    `data_order.json`). Inputs and settings are checked before anything is
    written; then `config.json` records the settings (see docs/own-data.md).

    Args:
        config: an `ExperimentConfig` (or a dict of its fields).
        command_line: str or None, recorded in `config.json`.

    Returns:
        An `ExperimentResult`: the written paths, the test scores, the test
        sources with their translations, steps and minutes.

    Example:

    >>> run_experiment(ExperimentConfig(data_dir="wmt14", output_dir="runs/base"))
    """
    if isinstance(config, dict):
        config = ExperimentConfig.from_dict(config)
    start_time = time.time()
    check_inputs(config)
    distribution = RunDistribution.from_config(config)
    # Processes of one run may share --output-dir: each writes everything (all of them
    # need their checkpoints to resume), so all but the first write in a subfolder.
    output_dir = os.path.abspath(os.path.join(config.output_dir, distribution.member_folder))
    pipeline = config.pipeline_config(num_replicas=distribution.replicas, **distribution.processes)
    settings = run_settings(config, pipeline, command_line)
    recorded = check_resumed_settings(settings, output_dir)
    _prepare_output_dir(output_dir)
    # Progress and messages (checkpoints, progress bars) go to stderr: stdout is the caller's.
    with (
        OutputDirLock(output_dir),
        _keep_jax_compilations(output_dir),
        contextlib.redirect_stdout(sys.stderr),
    ):
        write_run_config(settings, output_dir, recorded)
        return _run(config, distribution, output_dir, start_time)


def check_inputs(config):
    """Raises for a missing input file before the run writes anything.

    Args:
        config: an `ExperimentConfig`.

    Raises:
        FileNotFoundError: a data folder or a split's file does not exist.
        ValueError: `select_on_valid` without a valid split.
    """
    if config.data_dir is not None and not os.path.isdir(config.data_dir):
        raise FileNotFoundError(f"--data-dir {config.data_dir} is not a directory.")
    # The generated corpus and TFDS have no files to look up yet.
    check_valid_settings(config, config.data_dir, files=config.data_dir is not None)
    if config.data_dir is None:
        return
    splits = [("test", config.test_split)]
    if config.tfds_name is None:
        splits.append(("training", config.train_split))
    for name, split in splits:
        check_files(split_paths(config, split, config.data_dir), name)


def _run(config, distribution, output_dir, start_time):
    """`run_experiment` once `output_dir` exists and this process holds it."""
    if config.precision is not None:
        keras.config.set_dtype_policy(config.precision)
    keras.utils.set_random_seed(config.seed)

    data_dir = _data_dir(config, output_dir)
    corpus = _training_corpus(config, data_dir)
    test_paths = split_paths(config, config.test_split, data_dir or "")
    check_files(test_paths, "test")
    check_valid_settings(config, data_dir)  # fail before training, not after it
    tokenizer = _tokenizer(config, corpus, output_dir)

    preset = get_preset(config.preset)
    train_steps = preset.train_steps if config.train_steps is None else config.train_steps
    average_last = config.average_last
    if average_last is None:
        average_last = preset.averaged_checkpoints
    with distribution.scope:
        model = apply_distribute_workarounds(
            Seq2SeqTransformer(config.model_config(tokenizer.vocabulary_size()))
        )
        smoothing = config.label_smoothing
        if smoothing is None:
            smoothing = preset.label_smoothing
        model.compile(
            optimizer=paper_optimizer(
                model.config.d_model,
                warmup_steps=config.warmup_steps,
                scale=config.learning_rate_scale,
                accumulation_steps=config.accumulation_steps,
                initial_rate=config.warmup_initial_rate,
                epsilon=config.adam_epsilon,
                **({} if config.clip_norm is None else {"global_clipnorm": config.clip_norm}),
            ),
            loss=LabelSmoothedCrossEntropy(
                label_smoothing=smoothing,
                reduction="sum" if config.accumulation_steps > 1 else "mean_with_sample_weight",
            ),
        )
        checkpoint = PeriodicCheckpoint(
            os.path.join(output_dir, "checkpoints"),
            every_steps=config.checkpoint_every_steps,
            every_minutes=config.checkpoint_every_minutes,
            keep=max(average_last, 5),
            # --final-model best or last: no average is put into the model at the end.
            average_last=average_last if config.final_model == "average" else None,
        )
        start = checkpoint.restore(model)
        # In the strategy's scope: the search it compiles may build the model's variables,
        # which a distribution strategy must own.
        validation = validation_callback(config, data_dir, model, tokenizer, output_dir, start)
    check_data_order_settings(config, output_dir, distribution.replicas, resumed=start > 0)

    train = make_translation_dataset(
        corpus,
        tokenizer,
        token_budget=config.token_budget,
        **config.pipeline_overrides,
        num_replicas=distribution.replicas,
        **distribution.processes,
        accumulation_steps=config.accumulation_steps,
        seed=config.seed,
        start_step=start,
    )
    logger.info("Training data: %s", train.summary)
    if config.verbose:
        print(train.summary, file=sys.stderr)
    total_batches = train_steps * config.accumulation_steps
    steps_per_epoch = min(train.steps_per_epoch, total_batches)
    monitor = TrainingMonitor(
        output_dir,
        every_steps=config.log_every_steps,
        tokens_per_batch=train.summary.target_tokens / train.steps_per_epoch,
        max_steps=train_steps,
        start_step=start,
        progress=bool(config.verbose),
    )
    if validation is not None:
        validation.monitor = monitor  # its time is not counted in tokens/s
    callbacks = [monitor, checkpoint]
    if validation is not None:
        # Before the checkpoint, whose `on_train_end` puts the average into the model.
        callbacks.insert(1, validation)
        if config.validate_every_steps is None:
            checkpoint.after_save = validation.validate
    try:
        model.fit(
            train.dataset,
            steps_per_epoch=steps_per_epoch,
            epochs=math.ceil(total_batches / steps_per_epoch),
            initial_epoch=min(start // steps_per_epoch, math.ceil(total_batches / steps_per_epoch)),
            # The checkpoint last: on SIGTERM it saves and stops after the monitor logged
            # the step.
            callbacks=callbacks,
            verbose=0,  # steps, not epochs: the monitor's progress lines instead
        )
    except FloatingPointError as error:
        checkpoint.restore_signal_handlers()
        if "checkpoint" in str(error):
            raise
        raise FloatingPointError(
            f"{error} Training stopped without saving; last good checkpoint: "
            f"{checkpoint.last_checkpoint() or 'none in ' + checkpoint.directory}"
        ) from error
    best_path = validation.best_path if validation is not None else None
    has_best = best_path is not None and os.path.exists(best_path)
    selection = None
    if config.select_on_valid:
        selection = select_on_valid(
            config, data_dir, model, tokenizer, checkpoint, average_last, validation, has_best
        )
        logger.info("Checkpoint selection: %s", selection.format())
        if config.verbose:
            print(
                f"Checkpoint selection on {config.valid_split}: {selection.format()}",
                file=sys.stderr,
            )
    elif config.final_model == "best":
        if has_best:
            average_checkpoints(model, [best_path])
            print(f"Final model: {best_path}", file=sys.stderr)
        else:
            print(
                "WARNING: --final-model best, but no validation ran (no best checkpoint): "
                "the final model is the last weights.",
                file=sys.stderr,
            )
    paths = {
        "data": data_dir,
        "vocabulary": os.path.join(output_dir, "vocabulary.model"),
        "checkpoints": checkpoint.directory,
        "train_log": os.path.join(output_dir, TrainingMonitor.CSV_NAME),
        **(
            {"valid_log": os.path.join(output_dir, ValidationCallback.CSV_NAME)}
            if validation
            else {}
        ),
        **({"best": best_path} if has_best else {}),
        "model": save_translation_model(model, tokenizer, os.path.join(output_dir, "model.keras")),
    }

    translator = config_translator(config, model, tokenizer)
    hypotheses = translator.translate(read_lines(test_paths[0]), verbose=config.verbose)
    name = os.path.basename(test_paths[1])
    paths["translations"] = os.path.join(output_dir, f"{name}.hyp")
    hypotheses, joined = join_line_breaks(hypotheses)
    if joined:
        message = f"{joined} translations had line breaks, written as spaces"
        logger.warning("%s in %s", message, paths["translations"])
        if config.verbose:
            print(f"{message} ({paths['translations']})")
    write_lines_atomic([(paths["translations"], hypotheses)])
    scores = score_files(
        paths["translations"], test_paths[1], config.metrics, language=config.target_language
    )
    paths["scores"] = os.path.join(output_dir, "scores.json")
    with atomic_output(paths["scores"], "w") as file:
        file.write(json.dumps(dataclasses.asdict(scores), indent=2) + "\n")

    valid_scores = None
    if config.evaluate_valid and config.valid_split:
        valid_scores = score_valid_split(config, data_dir, model, tokenizer, translator)
    sources = read_lines(test_paths[0])
    served = None
    if config.export:
        paths["saved_model"] = export_saved_model(
            model,
            tokenizer,
            os.path.join(output_dir, "saved_model"),
            beam_size=config.beam_size,
            alpha=config.alpha,
            max_extra_length=config.max_extra_length,
            overwrite=True,
        )
        served = _translate_with_saved_model(paths["saved_model"], sources[:NUM_EXAMPLES])
    return ExperimentResult(
        paths=paths,
        scores=scores,
        examples=list(zip(sources, hypotheses, strict=True)),
        saved_model_examples=served,
        valid_scores=valid_scores,
        selection=selection,
        num_parameters=int(sum(math.prod(w.shape) for w in model.trainable_weights)),
        model_config=model.config.to_dict(),
        train_steps=train_steps,
        minutes=(time.time() - start_time) / 60,
        data_summary=str(train.summary),
    )


def _translate_with_saved_model(path, sentences):
    """Translations of `sentences` by the exported SavedModel, as TF Serving would run it."""
    import tensorflow as tf

    serve = tf.saved_model.load(path).signatures["serving_default"]
    outputs = serve(sentences=tf.constant(sentences, dtype=tf.string))
    return [text.decode("utf-8") for text in outputs["translations"].numpy()]
