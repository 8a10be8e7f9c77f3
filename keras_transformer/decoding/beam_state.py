"""The loop state of beam search and its one stop rule (paper 6.1)."""

from typing import Any, NamedTuple

from keras import ops


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


def beam_search_done(state, max_penalty, settling_slot):
    """The stop rule: which sources of `state` are done (bool, (sources,)).

    Paper 6.1 "terminate[s] early when possible": a source is done when its
    finished hypothesis in slot `settling_slot` (0-based, by score) scores at
    least the best score any live beam could still reach. A live beam's
    log-probability only falls as it grows and the length penalty only
    grows up to the source's length limit, so that best is
    `live_scores[:, 0] / max_penalty`; the finished hypotheses up to the
    settling slot can then no longer change. With the slot of the
    `num_results`-th result (`stop_rule="results"`) the returned hypotheses
    are final; with the `beam_size`-th (`"beam"`, tensor2tensor's and flax's
    rule) every kept one is.

    The decoding loop runs while some source is not done (and within the
    length limit); done sources may leave it (`drop_settled`).

    Args:
        state: a `BeamState`.
        max_penalty: float32 (batch,), `length_penalty` of each source's
            longest output (its limit, plus EOS).
        settling_slot: int, the finished slot that decides.

    Returns:
        A bool tensor, `True` for each source (row of `state`) that is done.
    """
    best_possible = state.live_scores[:, 0] / ops.take(max_penalty, state.sources)
    return state.finished_scores[:, settling_slot] >= best_possible
