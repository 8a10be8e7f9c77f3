"""The phases of one training run, in order: data, vocabulary, model, training, final
weights (averaging or selection), evaluation, export. `run_experiment` calls each once."""

import dataclasses
import json
import logging
import math
import os
import sys
import typing

from keras_transformer.checkpoints import PeriodicCheckpoint
from keras_transformer.checkpoints.periodic_checkpoint import restore_latest_checkpoint
from keras_transformer.compat import apply_distribute_workarounds
from keras_transformer.data import make_translation_dataset
from keras_transformer.evaluation import ValidationCallback, score_files
from keras_transformer.experiment.adaptation import adapt_model, save_adaptation
from keras_transformer.experiment.inputs.extra_pairs import vocabulary_symbols, with_extra_pairs
from keras_transformer.experiment.inputs.init_from import given_vocabulary, run_model_config
from keras_transformer.experiment.inputs.split_files import SplitFiles
from keras_transformer.experiment.run_end import (
    final_weights,  # noqa: F401 (phase 5)
    stopped_by_loss,
)
from keras_transformer.experiment.settings.data_order_settings import check_data_order_settings
from keras_transformer.experiment.training_callbacks import TrainingCallbacks
from keras_transformer.experiment.valid_split import check_valid_settings, tokenizer_ids
from keras_transformer.export import export_saved_model, save_translation_model
from keras_transformer.models import Seq2SeqTransformer
from keras_transformer.synthetic import write_synthetic_corpus
from keras_transformer.text import (
    ParallelCorpus,
    SubwordTokenizer,
    load_tfds_corpus,
    read_lines,
    train_vocabulary,
)
from keras_transformer.text.text_files import (
    atomic_output,
    join_line_breaks,
    write_lines_atomic,
)
from keras_transformer.training import LabelSmoothedCrossEntropy, paper_optimizer
from keras_transformer.utils.run_directory import RunDirectory

logger = logging.getLogger("keras_transformer.experiment")
# Test sentences printed with their translations, and translated by the SavedModel.
NUM_EXAMPLES = 3


class TrainingSetup(typing.NamedTuple):
    """The training phase's result: the model trained and the callbacks that trained it."""

    model: Seq2SeqTransformer
    checkpoint: PeriodicCheckpoint
    validation: ValidationCallback | None
    start: int  # batches already trained on (a resumed run)


def data(config, run, splits):
    """Phase 1: the split files (generated first if the run has no data) and the training corpus.

    Args:
        config: the run's `ExperimentConfig`.
        run: the run's `RunDirectory` (or its path): generated data goes in its `data_path`.
        splits: the `SplitFiles` that `check_inputs` found, or None when the
            data is generated here (no --data-dir, no TFDS).

    Returns:
        `(data_dir, splits, corpus)`: the folder of the split files (None with
        TFDS and no --data-dir), the checked `SplitFiles`, the training corpus.
    """
    settings = config.data
    data_dir = settings.data_dir
    run = RunDirectory(run)
    if settings.generated:
        data_dir = run.data_path
        if not os.path.exists(os.path.join(data_dir, f"train.{settings.source_language}")):
            train, valid, test = settings.synthetic_sizes
            write_synthetic_corpus(
                data_dir, train_size=train, valid_size=valid, test_size=test, seed=config.seed
            )
    if splits is None:
        splits = SplitFiles.find(settings, data_dir, valid=check_valid_settings(config))
    if settings.tfds_name is not None:
        corpus = load_tfds_corpus(
            settings.tfds_name,
            split=settings.train_split,
            source_language=settings.source_language,
            target_language=settings.target_language,
        )
    else:
        corpus = ParallelCorpus.from_files(*splits.train)
    # --extra-source/--extra-target (tagged with --tag-extra) join the training pairs only.
    corpus = with_extra_pairs(config.extra_data, corpus, verbose=config.verbose)
    return data_dir, splits, corpus


def vocabulary(config, corpus, run):
    """Phase 2: the shared subword vocabulary: trained on `corpus`, kept from a resumed run,
    or the `--vocabulary` file's (copied into the `RunDirectory` `run`, or a path)."""
    settings = config.data
    path = RunDirectory(run).vocabulary_path
    if settings.vocabulary_file is not None:
        return SubwordTokenizer(proto=given_vocabulary(settings.vocabulary_file, path))
    if os.path.exists(path):  # a resumed run keeps its vocabulary
        with open(path, "rb") as file:
            tokenizer = SubwordTokenizer(proto=file.read())
        if tokenizer.vocabulary_size() != settings.vocabulary_size:
            raise ValueError(
                f"{path} (from an earlier run in this output directory) has "
                f"{tokenizer.vocabulary_size()} pieces, but vocabulary_size="
                f"{settings.vocabulary_size} was asked for: use another --output-dir."
            )
        return tokenizer
    return train_vocabulary(
        corpus,
        vocabulary_size=settings.vocabulary_size,
        model_type=settings.vocabulary_type,
        lowercase=settings.vocabulary_lowercase,
        seed=config.seed,
        output_path=path,
        user_symbols=vocabulary_symbols(config.extra_data),  # the --tag-extra tag, one piece
    )


def compiled_model(config, distribution, tokenizer, run, init_model=None):
    """Phase 3: the compiled model, restored from the last checkpoint of a resumed run.

    Args:
        init_model: the `--init-from` model whose weights a new run starts
            from (its architecture, with the run's dropouts), or None.

    Returns:
        `(model, start)`: the model, and the batches it was trained on (0 for a new run).
    """
    if init_model is None:
        model_config = config.model_config(tokenizer.vocabulary_size())
    else:
        model_config = run_model_config(config.model)
    optimization = config.optimization
    with distribution.scope:
        model = apply_distribute_workarounds(Seq2SeqTransformer(model_config))
        if init_model is not None:  # a checkpoint of a resumed run replaces them below
            model.build()
            model.set_weights(init_model.get_weights())
            adapt_model(model, config.adaptation, verbose=config.verbose)  # LoRA, --freeze
        model.compile(
            optimizer=paper_optimizer(
                model.config.d_model,
                warmup_steps=optimization.warmup_steps,
                scale=optimization.learning_rate_scale,
                accumulation_steps=optimization.accumulation_steps,
                initial_rate=optimization.warmup_initial_rate,
                epsilon=optimization.adam_epsilon,
                **(
                    {}
                    if optimization.clip_norm is None
                    else {"global_clipnorm": optimization.clip_norm}
                ),
            ),
            loss=LabelSmoothedCrossEntropy(
                label_smoothing=config.label_smoothing(),
                pad_id=model.config.pad_id,
                reduction="sum"
                if optimization.accumulation_steps > 1
                else "mean_with_sample_weight",
            ),
        )
        start = restore_latest_checkpoint(run.checkpoints_path, model)
    return model, start


def training_batches(config, distribution, corpus, tokenizer, run, start):
    """The training batches from the data position `start` (a `TranslationDataset`)."""
    settings = config.data
    check_data_order_settings(config, run, distribution.replicas, resumed=start > 0)
    train = make_translation_dataset(
        corpus,
        tokenizer,
        token_budget=settings.token_budget,
        **settings.pipeline_overrides,
        num_replicas=distribution.replicas,
        **distribution.processes,
        accumulation_steps=config.optimization.accumulation_steps,
        seed=config.seed,
        start_step=start,
        **tokenizer_ids(tokenizer),
    )
    logger.info("Training data: %s", train.summary)
    if config.verbose:
        print(train.summary, file=sys.stderr)
    return train


def training(config, distribution, model, start, corpus, tokenizer, valid, run):
    """Phase 4: `fit` up to the run's step count, checkpointing (and validating) on the way.

    Returns:
        `(setup, summary)`: the `TrainingSetup`, and str, the training data's summary.
    """
    train = training_batches(config, distribution, corpus, tokenizer, run, start)
    callbacks = TrainingCallbacks.for_run(
        config, distribution, model, start, train, tokenizer, valid, run
    )
    checkpoint, validation = callbacks.checkpoint, callbacks.validation
    setup = TrainingSetup(model, checkpoint, validation, start)
    train_steps, accumulation = config.steps_to_train(), config.optimization.accumulation_steps
    # `start` counts batches; an update is `accumulation_steps` of them.
    if start >= train_steps * accumulation:
        # `fit` would train one batch of its last epoch before any callback could stop it.
        message = f"Nothing left to train: the run is at step {start // accumulation} of "
        message += f"{train_steps}."
        logger.info(message)
        if config.verbose:
            print(message, file=sys.stderr)
        if validation is not None:
            validation.set_model(model)  # as `fit` would: selection on valid measures through it
        return setup, str(train.summary)
    total_batches = train_steps * accumulation
    steps_per_epoch = min(train.steps_per_epoch, total_batches)
    epochs = math.ceil(total_batches / steps_per_epoch)
    try:
        model.fit(
            train.dataset,
            steps_per_epoch=steps_per_epoch,
            epochs=epochs,
            initial_epoch=min(start // steps_per_epoch, epochs),
            callbacks=callbacks.for_fit(),
            verbose=0,  # steps, not epochs: the monitor's progress lines instead
            shuffle=False,  # the dataset shuffles itself (and Keras warns otherwise)
        )
    except FloatingPointError as error:
        checkpoint.restore_signal_handlers()
        # A divergence began at `first_step`: checkpoints from then on are not good ones.
        raise stopped_by_loss(error, checkpoint, validation) from error
    return setup, str(train.summary)


def save_model(setup, tokenizer, data_dir, run):
    """The final model saved with its tokenizer (`model.keras`), and the run's files so far.

    A LoRA run saves its model with the adapters merged, and the adapters alone
    (`adapter.lora`).

    Returns:
        `(paths, model)`: a dict of the paths the run wrote, by name, and the
        model saved (`setup.model`, or its merged copy for a LoRA run).
    """
    checkpoint, validation = setup.checkpoint, setup.validation
    paths = {"data": data_dir}
    if os.path.exists(run.vocabulary_path):  # an imported model's tokenizer has other files
        paths["vocabulary"] = run.vocabulary_path
    paths["checkpoints"] = checkpoint.directory
    paths["train_log"] = run.train_log_path
    if validation is not None:
        paths["valid_log"] = run.valid_log_path
        if validation.best_path is not None and os.path.exists(validation.best_path):
            paths["best"] = validation.best_path
    model = save_adaptation(setup.model, run, paths)
    paths["model"] = save_translation_model(model, tokenizer, run.model_path)
    return paths, model


def evaluation(config, translator, splits, paths, run):
    """Phase 6: the test translations and their scores, written beside the run's files.

    Returns:
        `(sources, hypotheses, scores)`.
    """
    test_files = splits.test
    sources = read_lines(test_files[0])
    hypotheses = translator.translate(sources, verbose=config.verbose)
    paths["translations"] = run.hypotheses_path(test_files[1])
    hypotheses, joined = join_line_breaks(hypotheses)
    if joined:
        message = f"{joined} translations had line breaks, written as spaces"
        # Shown on stderr (logging's last-resort handler) unless logging is configured.
        logger.warning("%s in %s", message, paths["translations"])
    write_lines_atomic([(paths["translations"], hypotheses)])
    scores = score_files(
        paths["translations"],
        test_files[1],
        config.validation.metrics,
        language=config.data.target_language,
        lowercase=config.data.vocabulary_lowercase,
    )
    paths["scores"] = run.scores_path
    with atomic_output(paths["scores"], "w") as file:
        file.write(json.dumps(dataclasses.asdict(scores), indent=2) + "\n")
    return sources, hypotheses, scores


def export(config, model, tokenizer, sources, paths, run):
    """Phase 7: the SavedModel for TF Serving, and its translations of the first sources.

    Returns:
        list of str, or None without --export.
    """
    if not config.export:
        return None
    paths["saved_model"] = export_saved_model(
        model,
        tokenizer,
        run.saved_model_path,
        config.decoding,
        overwrite=True,
    )
    return _translate_with_saved_model(paths["saved_model"], sources[:NUM_EXAMPLES])


def _translate_with_saved_model(path, sentences):
    """Translations of `sentences` by the exported SavedModel, as TF Serving would run it."""
    import tensorflow as tf

    serve = tf.saved_model.load(path).signatures["serving_default"]
    outputs = serve(sentences=tf.constant(sentences, dtype=tf.string))
    return [text.decode("utf-8") for text in outputs["translations"].numpy()]
