"""The one-line progress report of step-budgeted training, on stderr."""

from keras_transformer.utils.live_line import format_duration


def format_progress(step, max_steps, loss, learning_rate, tokens_per_second, elapsed, eta):
    """One progress line: step of max steps, loss, learning rate, tokens/s, elapsed, ETA.

    Args:
        step: int, optimizer updates done (restored ones included).
        max_steps: int or None.
        loss: float, the mean training loss since the previous line.
        learning_rate: float, the rate of the last update.
        tokens_per_second: float or None, real target tokens per second.
        elapsed: float, seconds of training so far (earlier runs of a resumed one included).
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
