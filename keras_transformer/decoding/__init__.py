"""Decoding: beam search (paper 6.1), greedy search and sampling with the key/value cache.

The strategies are registered by name (`DecodingConfig.search`, `get_search`).
"""

from keras_transformer.utils.lazy_exports import lazy_exports

# Each public name and its module, imported on first use: importing the package loads
# no backend (keras_transformer/utils/lazy_exports.py).
__all__ = lazy_exports(
    __name__,
    {
        "BeamState": "beam_state",
        "beam_search": "beam_search",
        "beam_search_done": "beam_stop_rule",
        "build_beam_search": "beam_search",
        "length_penalty": "beam_search",
        "build_greedy_search": "greedy_search",
        "build_sampling_search": "sampling_search",
        "sampling_log_probs": "sampling_search",
        "DecodingConfig": "decoding_config",
        "Ensemble": "ensemble",
        "get_search": "decoding_config",
        "SearchStrategy": "search_strategy",
        "Translator": "translator",
    },
)
