"""`SearchStrategy`: one registered decoding strategy, named by `DecodingConfig.search`."""

import dataclasses
import importlib


@dataclasses.dataclass(frozen=True)
class SearchStrategy:
    """A decoding strategy: the module that builds it and how many results it gives.

    Importing this module (and `DecodingConfig`, which holds the registry)
    loads no backend: the strategy's module is imported when a search is
    built. Each strategy module has one function,
    `build_search(model, decoding, *, bos_id, eos_id, **options)`, that
    returns `search(encoder_token_ids) -> (tokens, scores)` with `tokens`
    int32 (batch, num_results, length) and `scores` float32 (batch,
    num_results), best first, built from the `DecodingConfig` alone.

    Args:
        module: str, the module's name under `keras_transformer.decoding`.
        max_results: the most results per sentence: an int, the name of a
            `DecodingConfig` field holding it (beam search: `"beam_size"`),
            or None for no bound.

    Example:

    >>> SearchStrategy("greedy_search", max_results=1).builder()
    <function build_search at ...>
    """

    module: str
    max_results: int | str | None = None

    def builder(self):
        """The module's `build_search` (imports the module, and so the backend)."""
        return importlib.import_module(f"keras_transformer.decoding.{self.module}").build_search

    def results_limit(self, decoding):
        """`(limit, name)`: the most results `decoding` may ask for, and what sets it.

        `name` is the field holding the limit, or None for a fixed one; the
        limit is None where there is none.
        """
        if isinstance(self.max_results, str):
            return getattr(decoding, self.max_results), self.max_results
        return self.max_results, None
