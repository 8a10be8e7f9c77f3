"""Dict conversion for the package's config dataclasses."""

import dataclasses


class DataclassConfig:
    """Mixin for config dataclasses: `from_dict` naming unknown keys, `to_dict`, `replace`."""

    @classmethod
    def from_dict(cls, config):
        """Builds a config from a dict, naming unknown keys in the error."""
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(
                f"Unknown {cls.__name__} fields: {unknown}. Expected some of {sorted(known)}."
            )
        return cls(**config)

    def to_dict(self):
        return dataclasses.asdict(self)

    def replace(self, **changes):
        """A copy with `changes` applied (validated again)."""
        return dataclasses.replace(self, **changes)
