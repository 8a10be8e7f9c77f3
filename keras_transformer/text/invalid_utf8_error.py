"""`InvalidUtf8Error`: a text file with a line that is not UTF-8, by file, line and byte."""

import os


class InvalidUtf8Error(ValueError):
    """A line of a text file is not valid UTF-8.

    Its message is for Python callers (`read_lines(errors="replace")` substitutes
    U+FFFD); `command_line_message()` is the line a command prints, saying what a
    user of the command can do about the file.

    Args:
        path: str or path-like, the file.
        line: int, the 1-based line number.
        position: int, the 1-based byte position in the line of the first invalid byte.
        byte: bytes, that byte.
        description: str, what the file is ("source file"), for the message.

    Example:

    >>> try:
    ...     read_lines("latin1.de")
    ... except InvalidUtf8Error as error:
    ...     print(error.command_line_message())
    latin1.de: line 2 is not UTF-8 text (byte 5: b'\\xdf'); ...
    """

    def __init__(self, path, line, position, byte, description="file"):
        self.path, self.line, self.position, self.byte = os.fspath(path), line, position, byte
        super().__init__(
            f"Invalid UTF-8 in the {description} {self.path!r}, line {line}, byte {position} "
            f"({byte!r}). Fix the file, or pass errors='replace' to substitute U+FFFD."
        )

    def command_line_message(self):
        """The one line a command prints: the file, the line, and what the file must be."""
        return (
            f"{self.path}: line {self.line} is not UTF-8 text (byte {self.position}: "
            f"{self.byte!r}); the file must be UTF-8: convert it (iconv -f latin1 -t utf-8 "
            "for Latin-1 text) or fix that line"
        )
