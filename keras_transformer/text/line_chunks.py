"""Reading lines in chunks from a file, a pipe or a terminal, without waiting for the end."""

import os
import select
import stat

READ_SIZE = 1 << 16


def decode_line(raw):
    """One line's bytes -> str: a `"\\r"` before the newline dropped, invalid UTF-8 as U+FFFD.

    The rule of `read_lines(errors="replace")` and of the SavedModel's
    `serving_default` signature (`tf.strings.unicode_transcode` with
    `errors="replace"`): each maximal invalid subsequence becomes one U+FFFD.

    Args:
        raw: bytes without the `"\\n"`.

    Returns:
        `(text, replaced)`: the str and whether invalid UTF-8 was replaced.
    """
    raw = raw.removesuffix(b"\r")
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), True


def _waits_for_input(file):
    """Whether reading `file` can block (a pipe, terminal or socket), so pauses are seen."""
    try:
        mode = os.fstat(file.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


class LineChunks:
    """Yields a stream's lines in lists of at most `chunk_size`, as soon as they are complete.

    A chunk is yielded when it holds `chunk_size` lines, when the input
    ends, and, on a pipe or a terminal, when lines are waiting and no more
    input arrives for `pause_seconds`: a line typed (or written by the
    process upstream) is translated without waiting for the next ones.
    Memory holds one chunk, whatever the size of the input. Lines end at
    `"\\n"` only; a final line without one counts; see `decode_line`.

    Args:
        file: a binary file object (`sys.stdin.buffer`, `open(path, "rb")`,
            a `gzip` file).
        chunk_size: int >= 1. Lines per chunk at most.
        pause_seconds: float. How long a pipe or terminal may stay silent
            before the lines already read are yielded.

    Attributes:
        lines: int, lines read so far.
        replaced: int, lines whose invalid UTF-8 was replaced by U+FFFD.
        first_replaced: int or None, the 1-based number of the first one.

    Example:

    >>> for chunk in LineChunks(sys.stdin.buffer, 1000):
    ...     write(translator.translate(chunk))
    """

    def __init__(self, file, chunk_size, pause_seconds=0.2):
        if chunk_size < 1:
            raise ValueError(f"`chunk_size` must be >= 1. Received: {chunk_size}")
        self.file = file
        self.chunk_size = chunk_size
        self.pause_seconds = pause_seconds
        self.lines = 0
        self.replaced = 0
        self.first_replaced = None

    def _read(self, descriptor):
        # os.read on a pipe returns what has arrived; a buffered read would wait for more.
        return (
            os.read(descriptor, READ_SIZE) if descriptor is not None else self.file.read1(READ_SIZE)
        )

    def _decode(self, raw):
        text, replaced = decode_line(raw)
        self.lines += 1
        if replaced:
            self.replaced += 1
            self.first_replaced = self.first_replaced or self.lines
        return text

    def __iter__(self):
        descriptor = self.file.fileno() if _waits_for_input(self.file) else None
        chunk, partial = [], []  # partial: the pieces of a line without its "\n" yet
        while True:
            if chunk and descriptor is not None:
                ready, _, _ = select.select([descriptor], [], [], self.pause_seconds)
                if not ready:
                    yield chunk
                    chunk = []
                    continue
            data = self._read(descriptor)
            if not data:
                break
            pieces = data.split(b"\n")
            if len(pieces) == 1:
                partial.append(data)
                continue
            pieces[0] = b"".join([*partial, pieces[0]])
            tail = pieces.pop()
            partial = [tail] if tail else []
            for raw in pieces:
                chunk.append(self._decode(raw))
                if len(chunk) == self.chunk_size:
                    yield chunk
                    chunk = []
        if partial:
            chunk.append(self._decode(b"".join(partial)))
        if chunk:
            yield chunk
