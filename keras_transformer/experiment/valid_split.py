"""The valid split of a run: its files, the validation while training, selection, scores."""

import glob
import os

from keras_transformer.checkpoints import (
    checkpoint_candidates,
    latest_checkpoints,
    select_checkpoint,
)
from keras_transformer.data import make_translation_dataset
from keras_transformer.decoding import Translator
from keras_transformer.evaluation import ValidationCallback, perplexity, sacre_bleu
from keras_transformer.evaluation.perplexity import compile_batch_nll
from keras_transformer.experiment.inputs.input_checks import check_valid_settings  # noqa: F401
from keras_transformer.text import ParallelCorpus
from keras_transformer.utils.run_directory import CHECKPOINT_PATTERN


def validation_callback(
    validation, decoding, valid, model, tokenizer, *, run, start, verbose, lowercase, monitor
):
    """The `ValidationCallback` of the run, or None when it does not validate.

    Args:
        validation: the run's `ValidationConfig`.
        decoding: the run's `DecodingConfig` (the search is `valid_search`).
        valid: `(corpus, batches)` of `valid_batches`, or None.
        model: the model trained.
        tokenizer: the run's `SubwordTokenizer`.
        run: the `RunDirectory` where the validation log and best checkpoint go.
        start: int, the batches trained on before this `fit`.
        verbose: bool, a line per validation on stderr.
        lowercase: bool, BLEU ignores case (a case-folded vocabulary).
        monitor: the run's `TrainingMonitor` (told the time validations take), or None.

    Returns:
        A `ValidationCallback`, or None.
    """
    if not (validation.validate and valid is not None):
        return None
    corpus, batches = valid
    count = min(validation.valid_max_sentences, len(corpus.sources))
    translator = Translator(model, tokenizer, decoding, search=validation.valid_search)
    return ValidationCallback(
        translator,
        list(corpus.sources[:count]),
        list(corpus.targets[:count]),
        batches,
        every_steps=validation.validate_every_steps,
        log_dir=run.path,
        best_dir=run.checkpoints_path,
        best_metric=validation.best_metric,
        patience=validation.patience,
        start_step=start,
        verbose=verbose,
        monitor=monitor,
        lowercase=lowercase,
    )


def tokenizer_ids(tokenizer):
    """The tokenizer's pad, begin and end ids, as `make_translation_dataset` settings.

    The package's vocabularies use 0, 2, 3 (PipelineConfig's defaults); an imported
    model's tokenizer (`--init-from`) may use others.
    """
    return {name: getattr(tokenizer, name) for name in ("pad_id", "bos_id", "eos_id")}


def valid_batches(data, paths, tokenizer):
    """The valid split, read once, and its batches (one pass, unshuffled).

    Args:
        data: the run's `DataConfig` (batching settings).
        paths: the valid split's `(source, target)` files (`SplitFiles.valid`).
        tokenizer: the run's `SubwordTokenizer`.

    Returns:
        `(corpus, batches)`: a `ParallelCorpus` and a cached `tf.data.Dataset`.
    """
    corpus = ParallelCorpus.from_files(*paths)
    batches = make_translation_dataset(
        corpus,
        tokenizer,
        token_budget=data.token_budget,
        **data.pipeline_overrides,
        shuffle=False,
        repeat=False,
        **tokenizer_ids(tokenizer),
    ).dataset
    return corpus, batches.cache()


def select_on_valid(config, valid, model, checkpoint, validation, has_best):
    """Keeps the candidate (kept checkpoints, their averages, the best) best on valid.

    Returns:
        A `CheckpointSelection`; `model` holds the selected weights.
    """
    pattern = CHECKPOINT_PATTERN  # PeriodicCheckpoint's files
    kept = glob.glob(os.path.join(checkpoint.directory, pattern))
    candidates = checkpoint_candidates(
        latest_checkpoints(checkpoint.directory, len(kept), pattern=pattern) if kept else [],
        config.checkpoints_averaged(),
        # Asked to keep more than it averages: the average of them all is a candidate too.
        average_all=config.checkpoint.keep_checkpoints is not None,
    )
    if has_best:
        candidates["best"] = [validation.best_path]
    if config.validation.select_metric == "bleu":
        return select_checkpoint(
            model,
            candidates,
            lambda _: validation.compute_metrics(perplexity=False)["bleu"],
            higher_is_better=True,
        )
    return select_checkpoint(model, candidates, _perplexity_score(valid, model, validation))


def _perplexity_score(valid, model, validation):
    """`score(model) -> valid perplexity`, one compiled program per batch shape.

    Run op by op, JAX compiles every operation for every batch shape (40 s for
    a one-layer model's first pass over 5 shapes). The validation callback's
    program, when there is one, has compiled those shapes already.
    """
    # The callback measures the model it was given (by `fit`, or by `training` when nothing
    # was left to train), which must be the one scored here.
    if validation is not None and validation.batches is not None and validation.model is model:
        return lambda _: validation.compute_metrics(bleu=False)["perplexity"]
    _, batches = valid
    batch_nll = compile_batch_nll(model)
    return lambda scored: perplexity(scored, batches, batch_nll=batch_nll)


def score_valid_split(valid, model, translator, validation=None, lowercase=False):
    """Table 3's dev columns: per-token perplexity (no smoothing) and sacreBLEU.

    `validation`, the run's `ValidationCallback` if any, lends its compiled
    perplexity program. `lowercase` makes the BLEU case-insensitive (for a
    case-folded vocabulary).

    Returns:
        A dict with `"perplexity"` and `"bleu"`.
    """
    corpus, _ = valid
    hypotheses = translator.translate(list(corpus.sources))
    bleu, _ = sacre_bleu(hypotheses, [list(corpus.targets)], lowercase=lowercase)
    return {"perplexity": _perplexity_score(valid, model, validation)(model), "bleu": bleu}
