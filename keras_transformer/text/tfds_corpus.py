"""Optional TFDS source for parallel corpora (e.g. `wmt14_translate`)."""

import logging

from keras_transformer.text.parallel_corpus import ParallelCorpus

logger = logging.getLogger("keras_transformer.text")


def _import_tfds():
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise ImportError(
            "Reading TFDS corpora needs the optional `tensorflow-datasets` package: "
            "`pip install 'keras-transformer-mt[tfds]'` (or `pip install tensorflow-datasets`). "
            "Plain text files need nothing extra: use `ParallelCorpus.from_files`."
        ) from None
    return tfds


def _decode(value, language, index, name):
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"Invalid UTF-8 in TFDS dataset {name!r}, example {index}, language "
            f"{language!r}: {error}"
        ) from None


def load_tfds_corpus(
    name="wmt14_translate/de-en",
    split="train",
    *,
    source_language="en",
    target_language="de",
    data_dir=None,
    download=True,
    max_examples=None,
):
    """Loads a TFDS translation dataset into a `ParallelCorpus`.

    `tensorflow-datasets` is imported only here; the rest of the package
    never needs it.

    Args:
        name: str. TFDS name with config, e.g. `"wmt14_translate/de-en"`
            (the paper's WMT 2014 English-German data).
        split: str. TFDS split, e.g. `"train"`, `"validation"`, `"test"`.
        source_language: str. Feature key of the source side.
        target_language: str. Feature key of the target side.
        data_dir: str or None. TFDS data directory.
        download: bool. Download and prepare the data if missing.
        max_examples: int or None. Read at most this many pairs.

    Returns:
        A `ParallelCorpus` named after the dataset, split and languages.

    Example:

    >>> corpus = load_tfds_corpus("wmt14_translate/de-en", "train")
    """
    tfds = _import_tfds()
    if max_examples is not None and max_examples <= 0:
        raise ValueError(f"`max_examples` must be positive. Received: {max_examples!r}")
    dataset = tfds.load(name, split=split, data_dir=data_dir, download=download)
    if max_examples is not None:
        dataset = dataset.take(max_examples)
    available = sorted(dataset.element_spec)
    for role, language in (("source", source_language), ("target", target_language)):
        if language not in available:
            raise ValueError(
                f"`{role}_language` must be a feature of {name!r}. "
                f"Received: {role}_language={language!r}; available: {available}"
            )
    sources, targets = [], []
    for index, example in enumerate(tfds.as_numpy(dataset)):
        sources.append(_decode(example[source_language], source_language, index, name))
        targets.append(_decode(example[target_language], target_language, index, name))
    if not sources:
        raise ValueError(f"TFDS dataset {name!r} split {split!r} has no examples.")
    logger.info("Read %d pairs from TFDS %s[%s].", len(sources), name, split)
    return ParallelCorpus(
        sources,
        targets,
        source_name=f"tfds:{name}[{split}]:{source_language}",
        target_name=f"tfds:{name}[{split}]:{target_language}",
    )
