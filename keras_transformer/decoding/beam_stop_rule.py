"""The beam search's stop rule: when a source's results can no longer change (paper 6.1)."""

from keras import ops


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
