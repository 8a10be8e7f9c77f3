"""`StateDict`: a checkpoint's tensors, each taken once, so that none goes unused."""

import numpy as np


class StateDict:
    """The tensors of a checkpoint, taken one by one, so that none goes unused.

    Args:
        tensors: dict of name -> numpy array.
        source: str, the file they came from, for messages.
    """

    def __init__(self, tensors, source):
        self.tensors = dict(tensors)
        self.source = source

    def __contains__(self, name):
        return name in self.tensors

    def take(self, name):
        """The float32 array `name`, removed from the ones left.

        Raises:
            ValueError: no tensor of that name.
        """
        if name not in self.tensors:
            raise ValueError(f"{self.source}: no tensor {name!r}")
        return np.asarray(self.tensors.pop(name), dtype="float32")

    def check_all_used(self):
        """Raises ValueError naming the tensors nothing took: a layout this import misreads."""
        if self.tensors:
            names = sorted(self.tensors)
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            raise ValueError(f"{self.source}: tensors this import does not know: {shown}")
