"""The settings of a training run, one dataclass per concern, and their checks."""
