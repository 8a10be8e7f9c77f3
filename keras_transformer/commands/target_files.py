"""`translate --target-prefix FILE` and `--constraints FILE`: read and checked before any backend.

Each file has one line per input line. A target-prefix line holds the first
words of that line's translation (an empty line: none); a constraints line
holds target phrases separated by tabs (an empty line: none), each of which
must appear in the translation.
"""

import dataclasses

from keras_transformer.decoding.target_inputs import parse_constraint_line


@dataclasses.dataclass
class TargetFiles:
    """The lines of `--target-prefix` and the phrases of `--constraints` (None: not given).

    Attributes:
        prefixes: list of str, or None.
        constraints: list of lists of str, or None.
        count: int or None, the lines each holds.
        position: int, the lines handed out so far (`take`).
    """

    prefixes: list | None = None
    constraints: list | None = None
    count: int | None = None
    position: int = 0

    def take(self, size):
        """`{"target_prefix": ..., "constraints": ...}` for the next `size` input lines.

        Raises:
            ValueError: the input has more lines than the files.
        """
        if self.count is None:
            return {}
        start, self.position = self.position, self.position + size
        if self.position > self.count:
            raise ValueError(f"the input has more lines than the {self.count} of {self.flags()}")
        taken = {}
        if self.prefixes is not None:
            taken["target_prefix"] = self.prefixes[start : self.position]
        if self.constraints is not None:
            taken["constraints"] = self.constraints[start : self.position]
        return taken

    def flags(self):
        return " and ".join(
            flag
            for flag, values in (
                ("--target-prefix", self.prefixes),
                ("--constraints", self.constraints),
            )
            if values is not None
        )


def _lines(parser, flag, path):
    from keras_transformer.text.text_files import read_lines

    try:
        return read_lines(path, errors="replace")
    except OSError as error:
        parser.error(f"{flag} {path}: {error.strerror or error}")


def _count_lines(path):
    from keras_transformer.text.text_files import open_binary

    count, last = 0, b"\n"
    with open_binary(path) as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def read_target_files(parser, options, search):
    """The `TargetFiles` of `options` (`TranslateOptions`); exits 2 in one line for a bad one.

    Args:
        parser: the command's `OneLineErrorParser`.
        options: its `TranslateOptions`.
        search: str, the `DecodingConfig.search` chosen.
    """
    files = TargetFiles()
    if options.target_prefix is not None:
        files.prefixes = _lines(parser, "--target-prefix", options.target_prefix)
    if options.constraints is not None:
        if search not in ("beam", "constrained"):
            parser.error(f"--constraints needs beam search. Received: --search {search}")
        files.constraints = []
        lines = _lines(parser, "--constraints", options.constraints)
        for number, line in enumerate(lines, start=1):
            try:
                files.constraints.append(parse_constraint_line(line))
            except ValueError as error:
                parser.error(f"--constraints {options.constraints} line {number} {error}")
    given = [
        (flag, path, values)
        for flag, path, values in (
            ("--target-prefix", options.target_prefix, files.prefixes),
            ("--constraints", options.constraints, files.constraints),
        )
        if values is not None
    ]
    if not given:
        return files
    files.count = len(given[0][2])
    for flag, path, values in given[1:]:
        if len(values) != files.count:
            parser.error(
                f"{flag} {path} has {len(values)} lines; {given[0][0]} {given[0][1]} has "
                f"{files.count} (one line per input line)"
            )
    if options.input != "-":
        count = _count_lines(options.input)
        for flag, path, values in given:
            if len(values) != count:
                parser.error(
                    f"{flag} {path} has {len(values)} lines; --input {options.input} has "
                    f"{count} (one line per input line)"
                )
    return files
