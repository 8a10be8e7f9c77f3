"""The one-line progress report of step-budgeted training, on stderr."""

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


def format_progress(step, max_steps, loss, learning_rate, tokens_per_second, elapsed, eta):
    """One progress line: step of max steps, loss, learning rate, tokens/s, elapsed, ETA.

    Args:
        step: int, optimizer updates done (restored ones included).
        max_steps: int or None.
        loss: float, the mean training loss since the previous line.
        learning_rate: float, the rate of the last update.
        tokens_per_second: float or None, real target tokens per second.
        elapsed: float, seconds since this process began training.
        eta: float or None, seconds left.

    Returns:
        str.

    Example:

    >>> format_progress(1200, 8000, 3.4567, 1.9e-3, 10512.3, 125.0, 708.3)
    'step 1200/8000 (15.0%) | loss 3.457 | lr 1.90e-03 | 10,512 tok/s | 2:05 elapsed | ETA 11:48'
    """
    if max_steps:
        parts = [f"step {step}/{max_steps} ({100.0 * step / max_steps:.1f}%)"]
    else:
        parts = [f"step {step}"]
    parts.append(f"loss {loss:.3f}")
    parts.append(f"lr {learning_rate:.2e}")
    if tokens_per_second is not None:
        parts.append(f"{tokens_per_second:,.0f} tok/s")
    parts.append(f"{format_duration(elapsed)} elapsed")
    if max_steps:
        parts.append(f"ETA {format_duration(eta)}")
    return " | ".join(parts)


def write_progress(line, stream=None, final=False):
    """Writes `line` to `stream` (stderr): rewritten in place on a terminal, else one line each.

    Args:
        line: str.
        stream: a text stream, or None for `sys.stderr` at call time.
        final: bool. On a terminal, end the line (the last update).
    """
    stream = sys.stderr if stream is None else stream
    if _is_terminal(stream):
        stream.write("\r" + line + "\x1b[K" + ("\n" if final else ""))
    else:
        stream.write(line + "\n")
    stream.flush()


def end_live_line(stream=None):
    """On a terminal, moves past a live progress line so the next message starts clean."""
    stream = sys.stderr if stream is None else stream
    if _is_terminal(stream):
        stream.write("\r\x1b[K")


def _is_terminal(stream):
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
