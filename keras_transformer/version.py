"""The one version of the distribution (pyproject.toml reads it; `keras-transformer --version`).

It imports nothing, so that any module may read it without loading another.
"""

__version__ = "0.1.0"
