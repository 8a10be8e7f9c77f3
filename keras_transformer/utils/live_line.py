"""A status line on stderr: rewritten in place on a terminal, one line each elsewhere."""

import math
import sys


def format_duration(seconds):
    """`seconds` as `H:MM:SS` (or `M:SS` under an hour); `?` when unknown.

    Example:

    >>> format_duration(3725)
    '1:02:05'
    """
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def write_progress(line, stream=None, final=False):
    """Writes `line` to `stream` (stderr): rewritten in place on a terminal, else one line each.

    Args:
        line: str.
        stream: a text stream, or None for `sys.stderr` at call time.
        final: bool. On a terminal, end the line (the last update).
    """
    stream = sys.stderr if stream is None else stream
    if is_terminal(stream):
        stream.write("\r" + line + "\x1b[K" + ("\n" if final else ""))
    else:
        stream.write(line + "\n")
    stream.flush()


def end_live_line(stream=None):
    """On a terminal, moves past a live progress line so the next message starts clean."""
    stream = sys.stderr if stream is None else stream
    if is_terminal(stream):
        stream.write("\r\x1b[K")


def is_terminal(stream):
    """Whether `stream` is an interactive terminal (a log file or a pipe is not)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
