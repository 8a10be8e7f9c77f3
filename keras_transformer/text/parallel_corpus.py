"""A line-aligned parallel corpus held in memory."""

import dataclasses
import os

from keras_transformer.text.text_files import read_lines, write_lines_atomic


@dataclasses.dataclass(frozen=True)
class ParallelCorpus:
    """Aligned source and target sentences: `sources[i]` translates to `targets[i]`.

    Build one from two line-aligned files with `from_files`, from TFDS with
    `load_tfds_corpus`, or from two lists directly.

    Example:

    >>> corpus = ParallelCorpus.from_files("train.en", "train.de.gz")
    >>> corpus, summary = clean_parallel_corpus(corpus, max_length=250)
    >>> len(corpus), corpus[0]
    (29000, ('Two young guys ...', 'Zwei junge Männer ...'))
    """

    # Source-language sentences, one per pair.
    sources: tuple[str, ...]
    # Target-language sentences, aligned with `sources`.
    targets: tuple[str, ...]
    # Where the sources came from (a file name), used in messages.
    source_name: str = "sources"
    # Where the targets came from, used in messages.
    target_name: str = "targets"

    def __post_init__(self):
        object.__setattr__(self, "sources", tuple(self.sources))
        object.__setattr__(self, "targets", tuple(self.targets))
        if len(self.sources) != len(self.targets):
            raise ValueError(
                "Source and target sides must have the same number of sentences: "
                f"{self.source_name!r} has {len(self.sources)}, "
                f"{self.target_name!r} has {len(self.targets)}."
            )
        for name, side in (("sources", self.sources), ("targets", self.targets)):
            for index, sentence in enumerate(side):
                if not isinstance(sentence, str):
                    raise TypeError(
                        f"`{name}` must hold str. Received: item {index} of type "
                        f"{type(sentence).__name__}"
                    )

    @classmethod
    def from_files(cls, source_path, target_path, *, errors="strict"):
        """Reads two line-aligned UTF-8 files (each plain or gzip).

        Both files are read completely and checked before anything is
        returned: missing files, invalid UTF-8 (with `errors="strict"`),
        different line counts and empty corpora raise errors that name the
        files.

        Args:
            source_path: str or `os.PathLike`. Source-language sentences.
            target_path: str or `os.PathLike`. Target-language sentences.
            errors: `"strict"` (default) or `"replace"`, for invalid UTF-8.

        Returns:
            A `ParallelCorpus`.
        """
        missing = [
            f"{role} file {os.fspath(path)!r}"
            for role, path in (("source", source_path), ("target", target_path))
            if not os.path.exists(path)
        ]
        if missing:
            raise FileNotFoundError(f"Parallel corpus file(s) not found: {', '.join(missing)}")
        sources = read_lines(source_path, errors=errors, description="source file")
        targets = read_lines(target_path, errors=errors, description="target file")
        source_name, target_name = os.fspath(source_path), os.fspath(target_path)
        if len(sources) != len(targets):
            raise ValueError(
                "Source and target files must have the same number of lines: "
                f"source file {source_name!r} has {len(sources)} lines, "
                f"target file {target_name!r} has {len(targets)} lines."
            )
        if not sources:
            raise ValueError(
                f"The parallel corpus is empty: {source_name!r} and {target_name!r} have no lines."
            )
        return cls(sources, targets, source_name=source_name, target_name=target_name)

    def write(self, source_path, target_path):
        """Writes both sides as line files; either both files are replaced or neither.

        Raises if a sentence contains a newline (it would break alignment).
        """
        write_lines_atomic([(source_path, self.sources), (target_path, self.targets)])

    def select(self, indices):
        """A corpus of the pairs at `indices` (in that order)."""
        return dataclasses.replace(
            self,
            sources=[self.sources[i] for i in indices],
            targets=[self.targets[i] for i in indices],
        )

    def __len__(self):
        return len(self.sources)

    def __getitem__(self, index):
        return self.sources[index], self.targets[index]

    def __iter__(self):
        return zip(self.sources, self.targets, strict=True)
