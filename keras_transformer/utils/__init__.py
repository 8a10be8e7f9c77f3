"""Helpers with no dependency on the rest of the package, usable from every folder."""

from keras_transformer.utils.command_line import OneLineErrorParser
from keras_transformer.utils.dataclass_config import DataclassConfig

__all__ = ["DataclassConfig", "OneLineErrorParser"]
