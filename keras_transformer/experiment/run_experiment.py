"""One training run end to end: data, vocabulary, model, training, averaging or selection,
evaluation, export (the phases of `run_phases`)."""

import contextlib
import logging
import math
import os
import sys
import time

import keras

from keras_transformer import backend
from keras_transformer.decoding import Translator
from keras_transformer.experiment import run_phases as phases
from keras_transformer.experiment.experiment_result import ExperimentResult
from keras_transformer.experiment.inputs import input_checks
from keras_transformer.experiment.inputs.extra_pairs import training_files
from keras_transformer.experiment.inputs.init_from import (
    check_init_tokenizer,
    initial_model,
    run_source_eos,
)
from keras_transformer.experiment.inputs.output_dir_lock import OutputDirLock
from keras_transformer.experiment.inputs.run_config_file import (
    check_resumed_settings,
    run_settings,
    write_run_config,
)
from keras_transformer.experiment.run_distribution import RunDistribution
from keras_transformer.experiment.settings.experiment_config import ExperimentConfig
from keras_transformer.experiment.valid_split import score_valid_split, valid_batches
from keras_transformer.training.csv_log import last_value
from keras_transformer.utils.run_directory import RunDirectory

logger = logging.getLogger("keras_transformer.experiment")


def _prepare_output_dir(path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise OSError(f"Cannot create the output directory {path}: {error.strerror}") from error
    if not os.access(path, os.W_OK):
        raise PermissionError(f"The output directory {path} is not writable.")


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

    >>> run_experiment(ExperimentConfig(output_dir="runs/base", data=DataConfig(data_dir="wmt14")))
    """
    if isinstance(config, dict):
        config = ExperimentConfig.from_dict(config)
    start_time = time.time()
    splits = check_inputs(config)
    warn_short_warmup(config)
    distribution = RunDistribution.from_name(config.distribution)
    # Processes of one run may share --output-dir: each writes everything (all of them
    # need their checkpoints to resume), so all but the first write in a subfolder.
    run = RunDirectory(os.path.abspath(config.output_dir)).member(distribution.member_folder)
    pipeline = config.pipeline_config(
        num_replicas=distribution.replicas,
        add_source_eos=run_source_eos(config.model),
        **distribution.processes,
    )
    # The training files' sizes and SHA-256: a resume on changed data is refused.
    data_files = training_files(config.extra_data, splits.train if splits is not None else None)
    settings = run_settings(config, pipeline, command_line, data_files=data_files)
    recorded = check_resumed_settings(settings, run)
    _prepare_output_dir(run.path)
    # Progress and messages (checkpoints, progress bars) go to stderr: stdout is the caller's.
    with (
        OutputDirLock(run),
        backend.compilation_cache(run.compilation_cache_path),
        contextlib.redirect_stdout(sys.stderr),
    ):
        write_run_config(settings, run, recorded)
        return _run(config, distribution, run, splits, start_time)


def warn_short_warmup(config):
    """A warning line when the run ends before its warmup does (never at the peak rate)."""
    steps, warmup = config.steps_to_train(), config.optimization.warmup_steps
    if steps < warmup:
        print(
            f"WARNING: --max-steps {steps} is below --warmup-steps {warmup}: the learning "
            f"rate rises for the whole run and stops at {steps / warmup:.0%} of its peak; "
            "lower --warmup-steps to reach it.",
            file=sys.stderr,
        )


def check_inputs(config):
    """`input_checks.check_inputs`, then the `--init-from` file's tokenizer (needs the backend).

    Returns:
        The `SplitFiles` of the data's `data_dir`, or None for generated data.

    Raises:
        FileNotFoundError, ValueError: see `input_checks.check_inputs`; also
            an --init-from tokenizer that cannot train (runs in Python only).
    """
    splits = input_checks.check_inputs(config)
    if config.model.init_from is not None:
        check_init_tokenizer(config.model.init_from)
    return splits


def _run(config, distribution, run, splits, start_time):
    """`run_experiment` once the `RunDirectory` `run` exists and this process holds it."""
    if config.model.precision is not None:
        keras.config.set_dtype_policy(config.model.precision)
    keras.utils.set_random_seed(config.seed)

    data_dir, splits, corpus = phases.data(config, run, splits)
    # --init-from: the model file's tokenizer (and weights); else a vocabulary of the run.
    init_model, tokenizer = initial_model(config.model.init_from, run, config.verbose)
    if tokenizer is None:
        tokenizer = phases.vocabulary(config, corpus, run)
    # The valid split, read and batched once for validation, selection and its scores.
    valid = None if splits.valid is None else valid_batches(config.data, splits.valid, tokenizer)
    model, start = phases.compiled_model(
        config, distribution, tokenizer, run, init_model=init_model
    )
    del init_model  # its weights are in `model`
    # A resumed run's training time before the step it resumes from, from its log.
    resumed_from = start // config.optimization.accumulation_steps
    earlier = resumed_from and last_value(run.train_log_path, "elapsed_seconds", resumed_from)
    setup, summary = phases.training(
        config, distribution, model, start, corpus, tokenizer, valid, run
    )
    selection = phases.final_weights(config, setup, valid)
    paths, model = phases.save_model(setup, tokenizer, data_dir, run)
    translator = Translator(model, tokenizer, config.decoding)
    sources, hypotheses, scores = phases.evaluation(config, translator, splits, paths, run)
    valid_scores = None
    if config.validation.evaluate_valid and valid is not None:
        valid_scores = score_valid_split(
            valid, model, translator, setup.validation, lowercase=config.data.vocabulary_lowercase
        )
    served = phases.export(config, model, tokenizer, sources, paths, run)

    return ExperimentResult(
        paths=paths,
        scores=scores,
        examples=list(zip(sources, hypotheses, strict=True)),
        saved_model_examples=served,
        valid_scores=valid_scores,
        selection=selection,
        num_parameters=int(sum(math.prod(w.shape) for w in model.trainable_weights)),
        model_config=model.config.to_dict(),
        train_steps=config.steps_to_train(),
        minutes=(time.time() - start_time + (earlier or 0.0)) / 60,
        data_summary=summary,
        resumed_from=resumed_from,
        process_minutes=(time.time() - start_time) / 60,
    )
