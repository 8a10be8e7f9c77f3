"""Constrained beam search's banks: constraint progress and dynamic beam allocation.

The parts of `constrained_search` that follow Post & Vilar (2018): each
candidate's progress through its source's phrases (`advance_constraints`),
its bank (the constraint tokens it has met), its rank within the bank
(`rank_in_bank`) and the beam filled round-robin over the banks
(`allocate_beams`). Candidates are (sources, M) tensors, in the order the
search built them (earlier candidates win ties).
"""

from keras import ops

from keras_transformer.decoding.target_inputs import MAX_PHRASE_TOKENS, MAX_PHRASES


def duplicate_candidates(keys, valid):
    """bool (sources, M): a valid earlier candidate has the same key (beam and token)."""
    earlier = _earlier(keys)
    same = ops.logical_and(keys[:, :, None] == keys[:, None, :], valid[:, None, :])
    return ops.any(ops.logical_and(same, earlier), axis=-1)


def advance_constraints(state, phrases, parents, tokens):
    """Each candidate's constraint progress after its token, and its bank.

    A token that continues the parent's phrase in progress advances it (and
    meets the phrase at its end); any other token abandons it and may start
    (or, with a one-token phrase, meet) the first unmet phrase it begins.
    """
    met = ops.take_along_axis(state.met, parents[:, :, None], axis=1)  # (sources, M, phrases)
    phrase = ops.take_along_axis(state.phrase, parents, axis=1)
    depth = ops.take_along_axis(state.depth, parents, axis=1)
    count, length = ops.shape(phrases.tokens)[1], ops.shape(phrases.tokens)[2]
    current = ops.maximum(phrase, 0)
    flat = ops.reshape(phrases.tokens, (-1, count * length))
    following = ops.take_along_axis(flat, current * length + ops.minimum(depth, length - 1), 1)
    current_length = ops.take_along_axis(phrases.lengths, current, axis=1)
    continues = ops.logical_and(phrase >= 0, tokens == following)
    completes = ops.logical_and(continues, depth + 1 == current_length)
    starts = ops.logical_and(ops.logical_not(met), (phrases.lengths > 0)[:, None, :])
    starts = ops.logical_and(starts, phrases.tokens[:, None, :, 0] == tokens[:, :, None])
    starts = ops.logical_and(starts, ops.logical_not(continues)[:, :, None])
    started = ops.cast(ops.argmax(ops.cast(starts, "int32"), axis=-1), "int32")
    has_start = ops.any(starts, axis=-1)
    start_completes = ops.logical_and(
        has_start, ops.take_along_axis(phrases.lengths, started, axis=1) == 1
    )
    slots = ops.arange(count, dtype="int32")[None, None, :]
    met = ops.logical_or(met, ops.logical_and(completes[:, :, None], slots == current[:, :, None]))
    met = ops.logical_or(
        met, ops.logical_and(start_completes[:, :, None], slots == started[:, :, None])
    )
    going_on = ops.logical_and(continues, ops.logical_not(completes))
    opening = ops.logical_and(has_start, ops.logical_not(start_completes))
    phrase = ops.where(going_on, phrase, ops.where(opening, started, -1))
    depth = ops.where(going_on, depth + 1, ops.where(opening, 1, 0))
    bank = ops.sum(ops.where(met, phrases.lengths[:, None, :], 0), axis=-1) + depth
    return met, phrase, depth, bank


def _earlier(candidates):
    """bool (1, M, M): `[0, i, j]` is whether candidate j comes before candidate i."""
    index = ops.arange(ops.shape(candidates)[1], dtype="int32")
    return (index[None, :] < index[:, None])[None]


def rank_in_bank(scores, bank, valid):
    """int32 (sources, M): how many valid candidates of the same bank rank before each."""
    earlier = _earlier(scores)
    better = ops.logical_or(
        scores[:, None, :] > scores[:, :, None],
        ops.logical_and(scores[:, None, :] == scores[:, :, None], earlier),
    )
    same_bank = ops.logical_and(bank[:, None, :] == bank[:, :, None], valid[:, None, :])
    return ops.sum(ops.cast(ops.logical_and(better, same_bank), "int32"), axis=-1)


def allocate_beams(k, scores, bank, rank, eligible):
    """`(index, kept)`, (sources, k): the live beams, round-robin over the banks.

    The best candidate of each bank (highest bank first), then the second
    of each, and so on; `kept` is False where fewer than `k` are eligible.
    """
    highest = MAX_PHRASES * MAX_PHRASE_TOKENS + 1
    order = rank * highest + (highest - 1 - bank)
    order = ops.where(eligible, order, 2**30)
    _, index = ops.top_k(-order, k)
    index = ops.cast(index, "int32")
    return index, ops.take_along_axis(eligible, index, axis=1)
