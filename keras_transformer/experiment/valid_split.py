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
from keras_transformer.text import ParallelCorpus


def split_paths(config, split, data_dir):
    """`(source_path, target_path)` of a split name or path prefix."""
    prefix = split if os.sep in split or "/" in split else os.path.join(data_dir, split)
    return tuple(
        f"{prefix}.{language}" for language in (config.source_language, config.target_language)
    )


def check_files(paths, split):
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"The {split} split needs {path}, which does not exist (files are looked up "
                "as {data_dir}/{split}.{language}; check --data-dir and the languages)."
            )


def check_valid_settings(config, data_dir, files=True):
    """Refuses settings that need the valid split without one, and checks its files.

    Args:
        config: the run's `ExperimentConfig`.
        data_dir: the folder of the split files.
        files: also check that the valid split's files exist.
    """
    needs = [
        name
        for name, on in (
            ("select_on_valid=True", config.select_on_valid),
            ("evaluate_valid=True", config.evaluate_valid),
            ("final_model='best'", config.final_model == "best"),
            ("validate=True", config.validate),
        )
        if on
    ]
    if not needs:
        return
    if not config.valid_split:
        if needs == ["validate=True"]:
            return  # nothing to validate on, which the user chose
        raise ValueError(f"{needs[0]} needs a valid_split (--valid-split).")
    if config.final_model == "best" and not config.validate:
        raise ValueError("final_model='best' needs validate=True (the best checkpoint's source).")
    if (
        config.select_on_valid
        and config.select_metric == "bleu"
        and not (config.validate and config.valid_max_sentences)
    ):
        raise ValueError(
            "select_metric='bleu' translates the valid sentences of the validation: it needs "
            "validate=True and valid_max_sentences > 0."
        )
    if files:
        check_files(split_paths(config, config.valid_split, data_dir or ""), "valid")


def config_translator(config, model, tokenizer, search="beam"):
    """A `Translator` with the run's decoding settings (paper 6.1 by default)."""
    return Translator(
        model,
        tokenizer,
        beam_size=config.beam_size,
        alpha=config.alpha,
        max_extra_length=config.max_extra_length,
        search=search,
    )


def validation_callback(config, data_dir, model, tokenizer, output_dir, start):
    """The `ValidationCallback` of the run, or None when it does not validate."""
    if not (config.validate and config.valid_split):
        return None
    corpus, batches = valid_batches(config, data_dir, tokenizer)
    count = min(config.valid_max_sentences, len(corpus.sources))
    translator = config_translator(config, model, tokenizer, search=config.valid_search)
    return ValidationCallback(
        translator,
        list(corpus.sources[:count]),
        list(corpus.targets[:count]),
        batches,
        every_steps=config.validate_every_steps,
        log_dir=output_dir,
        best_dir=os.path.join(output_dir, "checkpoints"),
        best_metric=config.best_metric,
        patience=config.patience,
        start_step=start,
        verbose=bool(config.verbose),
    )


def valid_batches(config, data_dir, tokenizer):
    """The valid split, read once, and its batches (one pass, unshuffled)."""
    if not config.valid_split:
        raise ValueError("Scoring on the valid split needs a valid_split (--valid-split).")
    paths = split_paths(config, config.valid_split, data_dir or "")
    check_files(paths, "valid")
    corpus = ParallelCorpus.from_files(*paths)
    batches = make_translation_dataset(
        corpus,
        tokenizer,
        token_budget=config.token_budget,
        **config.pipeline_overrides,
        shuffle=False,
        repeat=False,
    ).dataset
    return corpus, batches.cache()


def select_on_valid(
    config, data_dir, model, tokenizer, checkpoint, average_last, validation, has_best
):
    """Keeps the candidate (kept checkpoints, their average, the best) best on valid."""
    pattern = "ckpt-*.weights.h5"  # PeriodicCheckpoint's files
    kept = glob.glob(os.path.join(checkpoint.directory, pattern))
    candidates = checkpoint_candidates(
        latest_checkpoints(checkpoint.directory, len(kept), pattern=pattern), average_last
    )
    if has_best:
        candidates["best"] = [validation.best_path]
    if config.select_metric == "bleu":
        return select_checkpoint(
            model,
            candidates,
            lambda _: validation.compute_metrics(perplexity=False)["bleu"],
            higher_is_better=True,
        )
    _, batches = valid_batches(config, data_dir, tokenizer)
    return select_checkpoint(model, candidates, lambda m: perplexity(m, batches))


def score_valid_split(config, data_dir, model, tokenizer, translator):
    """Table 3's dev columns: per-token perplexity (no smoothing) and sacreBLEU."""
    corpus, batches = valid_batches(config, data_dir, tokenizer)
    hypotheses = translator.translate(list(corpus.sources))
    bleu, _ = sacre_bleu(hypotheses, [list(corpus.targets)])
    return {"perplexity": perplexity(model, batches), "bleu": bleu}
