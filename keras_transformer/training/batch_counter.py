"""The data position and update count of a `fit`, as seen from a callback."""


class BatchCounter:
    """Counts the batches `fit` has trained on, with any `steps_per_execution`.

    With `model.compile(steps_per_execution=N)`, Keras runs N batches per call
    of its training function and calls `on_train_batch_end` once per call, with
    the index (within the epoch) of the last batch run. Counting one batch per
    call would then undercount N times, and a checkpoint would record a data
    position N times too early. This counter adds the batches between two
    indices instead, so it is exact for any N (N = 1 included).

    With gradient accumulation over `accumulation` batches, an optimizer update
    (a "step") ends every `accumulation` batches; a callback can act only where
    a call of the training function ends, so when N is not a multiple of
    `accumulation` some calls end mid-update and `update_ended()` is False there.

    Args:
        start: int. Batches trained on before this `fit` (the data position).
        accumulation: int. Batches per optimizer update.

    Example:

    >>> counter = BatchCounter(start=0, accumulation=1)
    >>> counter.epoch_begin()
    >>> counter.batch_end(2)  # steps_per_execution=3: batches 0, 1 and 2 ran
    >>> counter.batches, counter.step
    (3, 3)
    """

    def __init__(self, start, accumulation):
        self.batches = int(start)  # batches trained on, this fit's and earlier ones
        self.accumulation = int(accumulation)  # batches per optimizer update
        self._in_epoch = 0  # batches run in the current epoch
        self._last_step = self.step  # the step at the previous `crossed` check

    @property
    def step(self):
        """Optimizer updates completed."""
        return self.batches // self.accumulation

    def epoch_begin(self):
        """Call from `on_epoch_begin`: Keras numbers batches from 0 in each epoch."""
        self._in_epoch = 0

    def batch_end(self, batch):
        """Call from `on_train_batch_end(batch, ...)`; counts the batches up to `batch`."""
        self.batches += batch + 1 - self._in_epoch
        self._in_epoch = batch + 1

    def update_ended(self):
        """True when no update is half-done (no gradients are partly accumulated)."""
        return self.batches % self.accumulation == 0

    def crossed(self, every):
        """True when a multiple of `every` steps was reached since the last call.

        With one update per callback this is `step % every == 0`; with several
        it still fires once per multiple passed, at the first chance after it.
        """
        previous, self._last_step = self._last_step, self.step
        return self.step // every > previous // every
