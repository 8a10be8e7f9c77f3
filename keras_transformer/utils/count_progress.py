"""Progress over a count of items (sentences, lines) on stderr."""

import sys
import time

from keras_transformer.utils.live_line import format_duration, is_terminal, write_progress


class CountProgress:
    """Reports items done, their rate and the time left, on stderr.

    On a terminal the line is rewritten in place at each `add`. Elsewhere (a
    log file, a pipe) a line is written at most every `interval` seconds and
    once more at `close`, so a log holds a few readable lines rather than
    carriage returns and colour codes. (Keras' `Progbar` takes every POSIX
    system for a terminal.)

    Args:
        total: int, the number of items; None when unknown (no percentage or ETA).
        unit: str, the plural name of an item.
        interval: float, the seconds between lines when the stream is not a terminal.
        stream: a text stream, or None for `sys.stderr` at each write.
        clock: callable returning seconds; `time.monotonic` unless testing.

    Example:

    >>> progress = CountProgress(1000, "sentences")
    >>> for batch in batches:
    ...     progress.add(len(batch))
    >>> progress.close()  # stderr: 1,000/1,000 sentences (100.0%) | 41.7 sentences/s | ...
    """

    def __init__(self, total=None, unit="items", interval=30.0, stream=None, clock=time.monotonic):
        valid = total is None or (type(total) is int and total >= 0)
        if not valid:
            raise ValueError(f"`total` must be an int >= 0 or None. Received: {total!r}")
        self.total = total
        self.unit = unit
        self.interval = interval
        self.stream = stream
        self.clock = clock
        self.done = 0
        self._start = clock()
        self._last_line = self._start
        self._closed = False

    def format(self, elapsed):
        """The line for `self.done` items in `elapsed` seconds.

        >>> progress = CountProgress(1000, "sentences")
        >>> progress.done = 250
        >>> progress.format(6.0)
        '250/1,000 sentences (25.0%) | 41.7 sentences/s | 0:06 elapsed | ETA 0:18'
        """
        if self.total is not None:
            percent = 100.0 * self.done / self.total if self.total else 100.0
            parts = [f"{self.done:,}/{self.total:,} {self.unit} ({percent:.1f}%)"]
        else:
            parts = [f"{self.done:,} {self.unit}"]
        rate = self.done / elapsed if elapsed > 0 else None
        if rate is not None:
            parts.append(f"{rate:,.1f} {self.unit}/s")
        parts.append(f"{format_duration(elapsed)} elapsed")
        if self.total is not None:
            eta = (self.total - self.done) / rate if rate else None
            parts.append(f"ETA {format_duration(eta)}")
        return " | ".join(parts)

    def add(self, count):
        """Counts `count` more items done and reports them (see the class doc for when)."""
        self.done += count
        now = self.clock()
        if self._terminal() or now - self._last_line >= self.interval:
            self._last_line = now
            write_progress(self.format(now - self._start), self.stream)

    def close(self):
        """Writes the final line (once), ending it on a terminal."""
        if self._closed:
            return
        self._closed = True
        write_progress(self.format(self.clock() - self._start), self.stream, final=True)

    def _terminal(self):
        return is_terminal(sys.stderr if self.stream is None else self.stream)
