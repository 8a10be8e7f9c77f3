"""Cost of validation while training, as a fraction of the training time between validations.

Builds a recipe's model, vocabulary and batches (default: Multi30k on
`--data-dir`), then measures with everything compiled first:

- one training step: the mean over `--steps` `train_on_batch` calls on batches of the
  recipe's pipeline (the same batches were run once before, to compile their shapes);
- one validation: `ValidationCallback.compute_metrics()` as the run calls it (perplexity
  over the whole valid split and sacreBLEU of the validation search on the first
  `--valid-max-sentences` sentences), the mean of `--repeats` calls after a first one
  that compiles.

It prints both in wall seconds and in process CPU seconds (less sensitive to other tenants
of a shared machine), and the ratio validation / (step x steps between validations), the
steps between validations being the recipe's `validate_every_steps` or, when that is None,
its `checkpoint_every_steps`. The target: <= 0.10 at the recipe's defaults.

Example:

    nice -n 19 python benchmarks/validation_cost.py --data-dir data/multi30k
    nice -n 19 python benchmarks/validation_cost.py --data-dir data/multi30k \\
        --valid-search beam --valid-max-sentences 1014
"""

import argparse
import os
import time

import keras

from keras_transformer.data import make_translation_dataset
from keras_transformer.decoding import Translator
from keras_transformer.evaluation import ValidationCallback
from keras_transformer.experiment.inputs.split_files import split_paths
from keras_transformer.experiment.recipes import load_recipe, recipe_names
from keras_transformer.experiment.valid_split import valid_batches
from keras_transformer.models import Seq2SeqTransformer, get_preset
from keras_transformer.text import ParallelCorpus, SubwordTokenizer, train_vocabulary
from keras_transformer.training import LabelSmoothedCrossEntropy, paper_optimizer


def _clock():
    return time.perf_counter(), time.process_time()


def _since(start):
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--recipe", default="multi30k", choices=recipe_names())
    parser.add_argument("--vocabulary", help="A vocabulary.model to reuse (else trained).")
    parser.add_argument("--steps", type=int, default=40, help="Training steps timed.")
    parser.add_argument("--repeats", type=int, default=2, help="Validations timed.")
    parser.add_argument("--valid-max-sentences", type=int)
    parser.add_argument("--valid-search", choices=("greedy", "beam"))
    arguments = parser.parse_args()

    config = load_recipe(arguments.recipe).replace(data={"data_dir": arguments.data_dir})
    for name in ("valid_max_sentences", "valid_search"):
        if getattr(arguments, name) is not None:
            config = config.replace(validation={name: getattr(arguments, name)})
    data, validation = config.data, config.validation
    corpus = ParallelCorpus.from_files(*split_paths(data, data.train_split, data.data_dir))
    if arguments.vocabulary:
        with open(arguments.vocabulary, "rb") as file:
            tokenizer = SubwordTokenizer(proto=file.read())
    else:
        tokenizer = train_vocabulary(
            corpus,
            vocabulary_size=data.vocabulary_size,
            model_type=data.vocabulary_type,
            seed=config.seed,
        )
    keras.utils.set_random_seed(config.seed)
    preset = get_preset(config.model.preset)
    model = Seq2SeqTransformer(config.model_config(tokenizer.vocabulary_size()))
    model.compile(
        optimizer=paper_optimizer(
            model.config.d_model,
            warmup_steps=config.optimization.warmup_steps,
            scale=config.optimization.learning_rate_scale,
        ),
        loss=LabelSmoothedCrossEntropy(label_smoothing=preset.label_smoothing),
    )
    train = make_translation_dataset(
        corpus, tokenizer, token_budget=data.token_budget, **data.pipeline_overrides
    )
    batches = list(train.dataset.take(arguments.steps).as_numpy_iterator())
    for inputs, labels in batches:  # compiles each shape
        model.train_on_batch(inputs, labels)
    start = _clock()
    for inputs, labels in batches:
        model.train_on_batch(inputs, labels)
    step_wall, step_cpu = (value / len(batches) for value in _since(start))

    valid_corpus, valid = valid_batches(
        data, split_paths(data, data.valid_split, data.data_dir), tokenizer
    )
    count = min(validation.valid_max_sentences, len(valid_corpus.sources))
    callback = ValidationCallback(
        Translator(model, tokenizer, config.decoding, search=validation.valid_search),
        list(valid_corpus.sources[:count]),
        list(valid_corpus.targets[:count]),
        valid,
    )
    callback.set_model(model)
    start = _clock()
    metrics = callback.compute_metrics()
    first_wall, first_cpu = _since(start)
    start = _clock()
    for _ in range(arguments.repeats):
        callback.compute_metrics()
    valid_wall, valid_cpu = (value / arguments.repeats for value in _since(start))

    every = validation.validate_every_steps or config.checkpoint.checkpoint_every_steps
    print(f"backend {keras.backend.backend()}, recipe {arguments.recipe}, {os.cpu_count()} CPUs")
    print(
        f"validation: {validation.valid_search} search on {count} sentences, perplexity on "
        f"{len(valid_corpus.sources)}; every {every} steps; "
        f"metrics of the untrained model: {metrics}"
    )
    print(f"training step: {step_wall:.4f} s wall, {step_cpu:.4f} CPU-s")
    print(f"validation: {valid_wall:.3f} s wall, {valid_cpu:.3f} CPU-s (first, compiling: "
          f"{first_wall:.1f} s wall, {first_cpu:.1f} CPU-s)")  # fmt: skip
    print(
        f"ratio validation / training between validations: "
        f"{valid_wall / (step_wall * every):.3f} wall, {valid_cpu / (step_cpu * every):.3f} CPU"
    )


if __name__ == "__main__":
    main()
