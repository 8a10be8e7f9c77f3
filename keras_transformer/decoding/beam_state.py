"""The loop state of beam search (paper 6.1): the live and finished hypotheses of each source."""

from typing import Any, NamedTuple


class BeamState(NamedTuple):
    """The loop variable of beam search: the sources still decoding, and the outputs.

    A `NamedTuple`, so it is one loop variable of `keras.ops.while_loop` (and
    `tf.while_loop`) on every backend. `k` is the beam size; `sources` rows
    are the sources still in the loop (all of them, unless settled ones are
    dropped).

    Attributes:
        step: int32 scalar, the tokens generated so far.
        live_seqs: int32 (sources, k, num_steps + 1), BOS then each live
            beam's tokens (padding after).
        live_scores: float32 (sources, k), the live beams' log-probabilities,
            best first (`NEG_INF` for beams not started).
        finished_seqs: int32 (sources, k, num_steps + 1), the best finished
            hypotheses so far, EOS included.
        finished_scores: float32 (sources, k), their length-penalized
            log-probabilities, best first (`NEG_INF` in empty slots).
        sources: int32 (sources,), each row's index in the batch.
        result_seqs: int32 (batch, num_results, num_steps + 1), the outputs
            of the sources that left the loop.
        result_scores: float32 (batch, num_results), their scores.
        cache: the `DecodingCache`, `k` growing rows per source.
    """

    step: Any
    live_seqs: Any
    live_scores: Any
    finished_seqs: Any
    finished_scores: Any
    sources: Any
    result_seqs: Any
    result_scores: Any
    cache: Any

    def replace(self, **fields):
        """The state with `fields` replaced."""
        return self._replace(**fields)
