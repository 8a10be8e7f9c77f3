"""Reading line-oriented text (plain or gzip) and writing files atomically.

Lines are split on `"\\n"` only. `str.splitlines` would also split on
U+2028, form feeds and other separators that occur inside real corpus lines,
which silently breaks the alignment of parallel files.
"""

import contextlib
import gzip
import logging
import os
import stat
import uuid
import zlib
from pathlib import Path

from keras_transformer.text.invalid_utf8_error import InvalidUtf8Error

logger = logging.getLogger("keras_transformer.text")

GZIP_MAGIC = b"\x1f\x8b"
ENCODING_ERRORS = ("strict", "replace")


def _check_errors(errors):
    if errors not in ENCODING_ERRORS:
        raise ValueError(f"`errors` must be one of {ENCODING_ERRORS}. Received: errors={errors!r}")


def open_binary(path):
    """Opens a file for reading bytes, decompressing it if its content is gzip."""
    with open(path, "rb") as file:
        magic = file.read(2)
    # Sniff the magic bytes rather than trusting a ".gz" suffix.
    if magic == GZIP_MAGIC:
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_lines(path, errors="strict", description="file"):
    """Reads a UTF-8 text file (optionally gzip-compressed) into a list of lines.

    Line ends (`"\\n"`, and a `"\\r"` before it) are removed. A final line
    without a newline counts as a line; a trailing newline does not start one.

    Args:
        path: str or `os.PathLike`. Plain or gzip file (detected from its content).
        errors: `"strict"` (default) raises on invalid UTF-8, naming the file
            and the line; `"replace"` substitutes U+FFFD and logs how many
            lines were affected.
        description: str. What the file is ("source file", ...), for messages.

    Returns:
        A list of str, one per line.

    Example:

    >>> read_lines("train.en.gz")[:2]
    ['Two young guys ...', 'Several men in hard hats ...']
    """
    _check_errors(errors)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"The {description} does not exist: {str(path)!r}")
    if path.is_dir():
        raise IsADirectoryError(f"The {description} is a directory, not a file: {str(path)!r}")
    lines = []
    replaced = []
    try:
        with open_binary(path) as file:
            for number, raw in enumerate(file, start=1):
                raw = raw.removesuffix(b"\n").removesuffix(b"\r")
                try:
                    lines.append(raw.decode("utf-8"))
                except UnicodeDecodeError as error:
                    if errors == "strict":
                        byte = raw[error.start : error.start + 1]
                        raise InvalidUtf8Error(
                            path, number, error.start + 1, byte, description
                        ) from None
                    lines.append(raw.decode("utf-8", errors="replace"))
                    replaced.append(number)
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise ValueError(
            f"The {description} {str(path)!r} is a truncated or corrupt gzip file: {error}"
        ) from None
    if replaced:
        logger.warning(
            "%s %r: replaced invalid UTF-8 with U+FFFD in %d line(s) (first: line %d).",
            description.capitalize(),
            str(path),
            len(replaced),
            replaced[0],
        )
    return lines


def _temporary_beside(path):
    """Creates an empty temporary file next to `path`; returns `(descriptor, name)`.

    Next to `path` means on the same file system, so `os.replace` onto `path`
    is atomic. `tempfile.mkstemp` would create it with mode 0600, which the
    rename would hand on to `path` (a vocabulary or a translation file another
    user, such as a TF Serving process, could no longer read). Instead the file
    gets the mode of the `path` it replaces, or 0666 less the umask for a new
    file, as `open` would give it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.parent / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(temporary, flags, 0o666)
    except OSError as error:  # named by the file the caller asked for, not the temporary
        raise type(error)(error.errno, error.strerror, str(path)) from None
    try:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temporary, stat.S_IMODE(os.stat(path).st_mode))
    except BaseException:
        os.close(descriptor)
        os.remove(temporary)
        raise
    return descriptor, str(temporary)


@contextlib.contextmanager
def atomic_output(path, mode="wb"):
    """Yields a temporary file that replaces `path` only if the block succeeds.

    The temporary file lives next to `path` (same file system, so
    `os.replace` is atomic); on any error it is removed and `path` keeps its
    previous content. The new `path` keeps the old one's permissions (see
    `_temporary_beside`).
    """
    descriptor, temporary = _temporary_beside(path)
    try:
        encoding = None if "b" in mode else "utf-8"
        newline = None if "b" in mode else "\n"
        with os.fdopen(descriptor, mode, encoding=encoding, newline=newline) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def write_bytes_atomic(path, data):
    """Writes `data` to `path` through a temporary file and `os.replace`."""
    with atomic_output(path, "wb") as file:
        file.write(data)


def join_line_breaks(texts):
    """Replaces the line breaks inside each text with spaces, for a one-per-line file.

    A translation can contain a line break (a byte-fallback piece for
    `"\\n"`); written as it is, it would shift every later line of the file
    against its source.

    Args:
        texts: iterable of str.

    Returns:
        `(texts, changed)`: the list of texts with `"\\r\\n"`, `"\\r"` and
        `"\\n"` replaced by one space each, and how many texts had one.
    """
    joined, changed = [], 0
    for text in texts:
        if "\n" in text or "\r" in text:
            text = text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
            changed += 1
        joined.append(text)
    return joined, changed


def write_lines_atomic(paths_and_lines):
    """Writes several line files so that either all are replaced or none is.

    Every file is written to a temporary name first; the renames happen only
    once all writes succeeded.

    Args:
        paths_and_lines: iterable of `(path, lines)`; `lines` an iterable of
            str without newlines.
    """
    staged = []
    try:
        for path, lines in paths_and_lines:
            descriptor, temporary = _temporary_beside(path)
            staged.append((temporary, path))
            with os.fdopen(descriptor, "w", encoding="utf-8", newline="\n") as file:
                for number, line in enumerate(lines, start=1):
                    if "\n" in line:
                        raise ValueError(
                            f"Line {number} for {str(path)!r} contains a newline; a line "
                            f"file cannot hold it. Received: {line[:80]!r}"
                        )
                    file.write(line)
                    file.write("\n")
                file.flush()
                os.fsync(file.fileno())
    except BaseException:
        for temporary, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)
        raise
    for temporary, path in staged:
        os.replace(temporary, path)
