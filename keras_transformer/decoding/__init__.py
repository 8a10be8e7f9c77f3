"""Decoding: greedy and beam search with the model's key/value cache (paper 6.1)."""

from keras_transformer.decoding.beam_search import beam_search, build_beam_search, length_penalty
from keras_transformer.decoding.greedy_search import build_greedy_search
from keras_transformer.decoding.translator import Translator

__all__ = [
    "Translator",
    "beam_search",
    "build_beam_search",
    "build_greedy_search",
    "length_penalty",
]
