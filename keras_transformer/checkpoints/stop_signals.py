"""Deferring a stop signal (preemption's SIGTERM) to a step boundary."""

import signal
import threading

from keras_transformer import backend


def in_one_process(model):
    """False when `model` trains across processes (multi-worker TF, multi-process JAX).

    One process of a cluster cannot stop alone: the others would wait for it
    at the next all-reduce. Clusters have their own preemption handling
    (e.g. `tf.distribute.experimental.PreemptionCheckpointHandler`).
    """
    return backend.in_one_process(model)


class StopSignals:
    """Catches stop signals and holds them until the trainer can stop cleanly.

    A cloud preemption or `kill` sends SIGTERM and gives the process a grace
    period (30 s on GCE and Kubernetes). Stopping at once would lose the
    updates since the last checkpoint; `PeriodicCheckpoint` instead takes the
    signal here, finishes the current update, saves, and then `deliver`s it.

    Args:
        signals: iterable of `signal.Signals` to catch.

    Example:

    >>> stop = StopSignals([signal.SIGTERM])
    >>> stop.install()
    >>> ...  # at a step boundary:
    >>> if stop.received is not None:
    ...     save(); stop.deliver()
    """

    def __init__(self, signals):
        self.signals = tuple(signals)
        self.received = None  # the first signal caught, or None
        self._previous = {}

    def install(self):
        """Starts catching; returns False where Python allows no handler (a non-main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        self.received = None
        for signum in self.signals:
            previous = _owner_handler(signal.getsignal(signum), signum)
            if previous is signal.SIG_IGN:
                continue  # the user chose to ignore it; so do we
            self._previous[signum] = previous
            signal.signal(signum, self._catch)
        return True

    @property
    def installed(self):
        """True between `install` and `restore` (or `deliver`)."""
        return bool(self._previous)

    def _catch(self, signum, frame):
        if self.received is None:
            self.received = signum

    def restore(self):
        """Puts back the handlers that were there before `install`."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def deliver(self):
        """Restores the handlers, then acts on the signal received as they would have.

        A Python handler the program had installed is called. Otherwise the
        process exits with status 128 + signal number (143 for SIGTERM, 130 for
        SIGINT, as if the signal had killed it) through `SystemExit`: Python's
        default SIGINT handler (a `KeyboardInterrupt` traceback) is not called.
        `finally` blocks run, and open files are flushed and closed.
        """
        signum, previous = self.received, self._previous.get(self.received)
        self.received = None  # delivered once; later signals go to the restored handlers
        self.restore()
        # Python's own SIGINT handler raises KeyboardInterrupt (a traceback): Ctrl-C ends
        # like SIGTERM instead, with status 130.
        if callable(previous) and previous is not signal.default_int_handler:
            previous(signum, None)
            return
        raise SystemExit(128 + int(signum))


def _owner_handler(handler, signum):
    """The handler a `StopSignals` left behind stands for: the one it replaced.

    A training run stopped by an exception never reaches `on_train_end`, so its
    `StopSignals` stays installed; a later run would otherwise take that stale
    catcher for the program's own handler and swallow the signal.
    """
    while isinstance(getattr(handler, "__self__", None), StopSignals):
        handler = handler.__self__._previous.get(signum, signal.SIG_DFL)
    return handler
