"""The line files of a run's splits (train, valid, test), found and checked once."""

import os
import typing


def split_paths(data, split, data_dir):
    """`(source_path, target_path)` of a split name or path prefix.

    Args:
        data: a `DataConfig`; its languages name the files.
        split: str, a split name (looked up in `data_dir`) or a path prefix.
        data_dir: str or None, the folder of the split files.

    Returns:
        A tuple of two str.
    """
    prefix = split if os.sep in split or "/" in split else os.path.join(data_dir or "", split)
    return tuple(
        f"{prefix}.{language}" for language in (data.source_language, data.target_language)
    )


def check_files(paths, split):
    """Raises `FileNotFoundError` naming the first of `paths` that is not a file."""
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"The {split} split needs {path}, which does not exist (files are looked up "
                "as {data_dir}/{split}.{language}; check --data-dir and the languages)."
            )


class SplitFiles(typing.NamedTuple):
    """The `(source, target)` files of each split a run reads, all of them existing.

    `SplitFiles.find(data, data_dir, valid)` looks every file up and checks
    it, so the run reads no path it has not checked.
    """

    train: tuple | None  # None when the training data comes from TFDS
    valid: tuple | None  # None when the run needs no valid split
    test: tuple

    @classmethod
    def find(cls, data, data_dir, valid):
        """The split files of `data` in `data_dir`, checked.

        Args:
            data: a `DataConfig`.
            data_dir: str or None, the folder of the split files (None: every
                split must be a path prefix).
            valid: bool, whether the run reads the valid split.

        Returns:
            A `SplitFiles`.

        Raises:
            FileNotFoundError: a split's file does not exist.
        """
        test = split_paths(data, data.test_split, data_dir)
        check_files(test, "test")
        train = None
        if data.tfds_name is None:
            train = split_paths(data, data.train_split, data_dir)
            check_files(train, "training")
        valid_files = None
        if valid:
            valid_files = split_paths(data, data.valid_split, data_dir)
            check_files(valid_files, "valid")
        return cls(train, valid_files, test)
