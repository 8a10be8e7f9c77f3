"""Lexically constrained beam search with dynamic beam allocation (Post & Vilar, 2018).

Each source may come with target phrases (token sequences) that must appear
in its output. Every hypothesis carries which phrases it has met and the
phrase it is in the middle of (`phrase`, `-1` for none) with the tokens of it
matched so far (`depth`). At each step the candidates of a source are the
best `2 * beam_size` continuations of its beams (those of plain beam search),
each beam's best next token, and, per beam, the next token of its phrase in
progress or else the first token of each unmet phrase. Duplicates are removed
and each candidate is put in the bank of the constraint tokens it has met.
The beam is allocated across banks round-robin (the vectorized form of Hu et
al., 2019): the best candidate of each bank, highest bank first, then the
second best of each, and so on until `beam_size` are kept. A hypothesis may
end (EOS) only once every phrase is met, unless the length limit forces EOS;
an EOS candidate finishes when it ranks among the `beam_size` best of its
bank. Finished hypotheses that miss constraint tokens (only at the length
limit) rank after every one that meets them all.

Without constraints every candidate is in bank 0 and the search is plain
beam search (`build_beam_search`), step for step. Sources stay in the loop
to the end (no `drop_settled`).
"""

from typing import Any, NamedTuple

import numpy as np
from keras import ops

from keras_transformer import backend
from keras_transformer.decoding.beam_search import _gather_beams, length_penalty
from keras_transformer.decoding.beam_stop_rule import beam_search_done
from keras_transformer.decoding.constraint_banks import (
    advance_constraints,
    allocate_beams,
    duplicate_candidates,
    rank_in_bank,
)
from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.decoding.search_steps import (
    NEG_INF,
    allowed_log_probs,
    compile_search,
    decode_step,
    decoding_loop,
    forced_prefix,
    output_limits,
    start_decoding,
)

# How much lower a finished hypothesis ranks per constraint token it misses.
UNMET_PENALTY = 1.0e4


class _State(NamedTuple):
    """The loop variable: `BeamState`'s fields (which `beam_search_done` reads) and each
    live beam's constraint progress: `met` bool (sources, k, phrases), `phrase` and
    `depth` int32 (sources, k); `finished_unmet` int32 (sources, k), the constraint
    tokens each finished hypothesis misses."""

    step: Any
    live_seqs: Any
    live_scores: Any
    finished_seqs: Any
    finished_scores: Any
    finished_unmet: Any
    sources: Any
    met: Any
    phrase: Any
    depth: Any
    cache: Any

    def replace(self, **fields):
        return self._replace(**fields)


class _Phrases(NamedTuple):
    """A batch's constraints: `tokens` int32 (batch, phrases, length), -1 padded;
    `lengths` int32 (batch, phrases), 0 for no phrase; `total` (batch,) their sum."""

    tokens: Any
    lengths: Any
    total: Any


def build_constrained_search(
    model, decoding=None, *, bos_id, eos_id, use_cache=True, drop_settled=None, **settings
):
    """Returns `search(encoder_token_ids, target_prefix, constraints) -> (tokens, scores)`.

    Lexically constrained beam search (see the module docstring), one
    compiled program. The registered strategy `"constrained"`.

    Args:
        model: a `Seq2SeqTransformer` (or an `Ensemble`).
        decoding: a `DecodingConfig` (None: the paper's settings): `beam_size`,
            `alpha`, `length_penalty_rule`, `max_extra_length` and
            `num_results` are read.
        bos_id: int. Begin-of-sentence id.
        eos_id: int. End-of-sentence id.
        use_cache: bool. Decode with the key/value cache (default).
        drop_settled: ignored: every source stays in the loop to the end.
        **settings: single `DecodingConfig` fields, applied over `decoding`.

    Returns:
        A function taking int (batch, source_length) ids, optionally a target
        prefix (int32 (batch, prefix_length), -1 padded, as `forced_prefix`
        reads it) and the constraints (int32 (batch, phrases, phrase_length),
        -1 padded; at most `MAX_PHRASES` by `MAX_PHRASE_TOKENS`), and
        returning `tokens` and `scores` as `build_beam_search` does.

    Example:

    >>> search = build_constrained_search(model, bos_id=2, eos_id=3)
    >>> tokens, scores = search(source_ids, no_prefix, phrase_ids)
    """
    del drop_settled
    decoding = DecodingConfig.from_settings(decoding, **{**settings, "search": "constrained"})
    pad_id = model.config.pad_id
    s = {"bos_id": bos_id, "eos_id": eos_id, "pad_id": pad_id, "k": decoding.beam_size}
    s.update(banned=tuple(sorted({pad_id, bos_id} - {eos_id})), decoding=decoding)
    s.update(use_cache=use_cache)

    def search(encoder_token_ids, *inputs):  # positional only: traced per arity
        target_prefix, constraints = (*inputs, None, None)[:2]
        return _search(model, s, encoder_token_ids, target_prefix, constraints)

    return compile_search(search, model)


# The strategy "constrained" of `DecodingConfig.search`.
build_search = build_constrained_search


def _phrases(constraints, batch_size):
    if constraints is None:
        constraints = ops.full((batch_size, 1, 1), -1, "int32")
    tokens = ops.cast(constraints, "int32")
    lengths = ops.sum(ops.cast(tokens >= 0, "int32"), axis=-1)
    return _Phrases(tokens, lengths, ops.sum(lengths, axis=-1))


def _search(model, s, encoder_token_ids, target_prefix, constraints):
    """One batch: `(tokens, scores)`."""
    encoder_token_ids = ops.cast(encoder_token_ids, "int32")
    batch_size, source_length = ops.shape(encoder_token_ids)
    k, decoding = s["k"], s["decoding"]
    num_steps = source_length + decoding.max_extra_length + 1
    limits = output_limits(encoder_token_ids, s["pad_id"], decoding.max_extra_length)
    phrases = _phrases(constraints, batch_size)
    prefix = None
    if target_prefix is not None:
        prefix = ops.repeat(ops.cast(target_prefix, "int32"), k, axis=0)
    max_penalty = _penalty(decoding, limits + 1)

    def not_done(state):
        done = beam_search_done(state, max_penalty, decoding.num_results - 1)
        return ops.logical_and(state.step < num_steps, ops.logical_not(ops.all(done)))

    def step_fn(state):
        return _step(model, s, (limits, prefix, phrases), state)

    state = _initial_state(model, s, encoder_token_ids, num_steps, phrases)
    with model.fixed_decoder_weights():
        state = decoding_loop(not_done, step_fn, state, num_steps, s["use_cache"], True)
    n = decoding.num_results
    tokens = state.finished_seqs[:, :n, 1:]
    scores = state.finished_scores[:, :n]
    ended = ops.cumsum(ops.cast(tokens == s["eos_id"], "int32"), axis=-1) > 0
    empty = scores < NEG_INF / 2
    tokens = ops.where(ops.logical_or(ended, empty[:, :, None]), s["pad_id"], tokens)
    unmet = ops.cast(state.finished_unmet[:, :n], "float32")
    scores = ops.where(empty, float("-inf"), scores + UNMET_PENALTY * unmet)
    return tokens, scores


def _penalty(decoding, length):
    return length_penalty(length, decoding.alpha, decoding.length_penalty_rule)


def _initial_state(model, s, encoder_token_ids, num_steps, phrases):
    """One live beam (BOS) per source; absent phrases (length 0) count as met."""
    batch_size = ops.shape(encoder_token_ids)[0]
    k = s["k"]
    encoded = model.encode(encoder_token_ids)
    cache = start_decoding(model, encoded, encoder_token_ids, num_steps, s["use_cache"], k)
    live_scores = ops.tile(
        ops.convert_to_tensor([[0.0] + [NEG_INF] * (k - 1)], "float32"), (batch_size, 1)
    )
    positions = ops.arange(num_steps + 1, dtype="int32")
    live_seqs = ops.cast(ops.where(positions == 0, s["bos_id"], s["pad_id"]), "int32")
    live_seqs = ops.broadcast_to(live_seqs, (batch_size, k, num_steps + 1))
    met = ops.repeat((phrases.lengths == 0)[:, None, :], k, axis=1)
    no_phrase = ops.full((batch_size, k), -1, "int32")
    return _State(
        step=ops.convert_to_tensor(0, "int32"),
        live_seqs=live_seqs,
        live_scores=live_scores,
        finished_seqs=ops.zeros_like(live_seqs),
        finished_scores=ops.full((batch_size, k), NEG_INF, "float32"),
        finished_unmet=ops.zeros((batch_size, k), "int32"),
        sources=ops.arange(batch_size, dtype="int32"),
        met=met,
        phrase=no_phrase,
        depth=ops.zeros_like(no_phrase),
        cache=cache,
    )


def _step(model, s, inputs, state):
    """One step: candidates, their constraint progress and banks, the new beams."""
    limits, prefix, phrases = inputs
    k, step = s["k"], state.step
    beam_limits = ops.repeat(limits, k, axis=0)
    buffer = ops.reshape(state.live_seqs, (-1, ops.shape(state.live_seqs)[-1]))
    logits, cache = decode_step(model, buffer, step, state.cache, s["use_cache"])
    log_probs = allowed_log_probs(logits, step, beam_limits, s["eos_id"], s["banned"])
    log_probs = forced_prefix(log_probs, step, prefix, beam_limits)
    vocab = log_probs.shape[-1]
    log_probs = ops.reshape(log_probs, (-1, k, vocab))
    # EOS only once every phrase is met, or where the length limit forces it.
    may_end = ops.logical_or(ops.all(state.met, axis=-1), (step >= limits)[:, None])
    is_eos = np.arange(vocab)[None, None, :] == s["eos_id"]
    log_probs = ops.where(
        ops.logical_and(is_eos, ops.logical_not(may_end)[:, :, None]), NEG_INF, log_probs
    )
    totals = ops.reshape(state.live_scores[:, :, None] + log_probs, (-1, k * vocab))

    parents, tokens, offered = _candidates(k, vocab, totals, state, phrases)
    scores = ops.take_along_axis(totals, parents * vocab + tokens, axis=1)
    valid = ops.logical_and(offered, scores > NEG_INF / 2)
    repeated = duplicate_candidates(parents * vocab + tokens, valid)
    valid = ops.logical_and(valid, ops.logical_not(repeated))
    met, phrase, depth, bank = advance_constraints(state, phrases, parents, tokens)
    rank = rank_in_bank(scores, bank, valid)
    ends = tokens == s["eos_id"]
    live = allocate_beams(k, scores, bank, rank, ops.logical_and(valid, ops.logical_not(ends)))
    live_scores = ops.where(live[1], ops.take_along_axis(scores, live[0], axis=1), NEG_INF)
    live_scores, order = ops.top_k(live_scores, k)  # best first, for the stop rule
    chosen = ops.take_along_axis(live[0], order, axis=1)
    live_parents = ops.take_along_axis(parents, chosen, axis=1)
    offsets = ops.arange(ops.shape(chosen)[0], dtype="int32")[:, None] * k
    cache = cache.follow_rows(ops.reshape(live_parents + offsets, (-1,)))
    finishing = ops.logical_and(ops.logical_and(valid, ends), rank < k)
    finished = _finish(s, state, (parents, tokens, scores, bank, phrases.total), finishing)
    return state.replace(
        step=step + 1,
        live_seqs=_extended(state.live_seqs, live_parents, _pick(tokens, chosen), step),
        live_scores=live_scores,
        met=_pick(met, chosen),
        phrase=_pick(phrase, chosen),
        depth=_pick(depth, chosen),
        cache=cache,
        **finished,
    )


def _pick(tensor, index):
    """tensor (sources, M, ...) at `index` (sources, n) along axis 1."""
    if len(tensor.shape) == 3:
        return ops.take_along_axis(tensor, index[:, :, None], axis=1)
    return ops.take_along_axis(tensor, index, axis=1)


def _extended(live_seqs, parents, tokens, step):
    """The parents' sequences (sources, n, length) with `tokens` written after `step`."""
    sequences = _gather_beams(live_seqs, parents)
    positions = ops.arange(ops.shape(live_seqs)[-1], dtype="int32")
    return ops.where(positions[None, None, :] == step + 1, tokens[:, :, None], sequences)


def _candidates(k, vocab, totals, state, phrases):
    """`(parents, tokens, offered)`, each (sources, 3k + k * phrases).

    The best `2k` continuations, each beam's best token, and per beam and
    phrase slot a constraint token: the next one of the phrase in progress
    (first slot only), else the first token of each unmet phrase.
    """
    count = ops.shape(phrases.tokens)[1]
    length = ops.shape(phrases.tokens)[2]
    _, top = backend.top_k(totals, 2 * k)
    best = ops.cast(ops.argmax(ops.reshape(totals, (-1, k, vocab)), axis=-1), "int32")
    beams = ops.broadcast_to(ops.arange(k, dtype="int32")[None, :], ops.shape(best))
    in_progress = state.phrase >= 0  # (sources, k)
    flat = ops.reshape(phrases.tokens, (-1, count * length))
    following = ops.take_along_axis(
        flat, ops.maximum(state.phrase, 0) * length + ops.minimum(state.depth, length - 1), axis=1
    )
    slots = ops.arange(count, dtype="int32")[None, None, :]
    firsts = phrases.tokens[:, None, :, 0]  # (sources, 1, phrases)
    wanted = ops.where(in_progress[:, :, None], following[:, :, None], firsts)
    wanted_ok = ops.where(
        in_progress[:, :, None],
        slots == 0,
        ops.logical_and(ops.logical_not(state.met), (phrases.lengths > 0)[:, None, :]),
    )
    wanted_beams = ops.broadcast_to(beams[:, :, None], ops.shape(wanted))
    parents = ops.concatenate(
        [top // vocab, beams, ops.reshape(wanted_beams, (ops.shape(best)[0], -1))], axis=1
    )
    tokens = ops.concatenate(
        [top % vocab, best, ops.reshape(ops.maximum(wanted, 0), (ops.shape(best)[0], -1))],
        axis=1,
    )
    offered = ops.concatenate(
        [
            ops.ones(ops.shape(top), "bool"),
            ops.ones(ops.shape(best), "bool"),
            ops.reshape(wanted_ok, (ops.shape(best)[0], -1)),
        ],
        axis=1,
    )
    return parents, tokens, offered


def _finish(s, state, candidates, finishing):
    """The finished hypotheses with this step's EOS candidates (those among the best `k`
    of their bank) merged in: `finished_seqs`, `finished_scores`, `finished_unmet`."""
    parents, tokens, scores, bank, total = candidates
    k, step = s["k"], state.step
    unmet = total[:, None] - bank
    penalized = scores / _penalty(s["decoding"], step + 1) - UNMET_PENALTY * ops.cast(
        unmet, "float32"
    )
    keys = ops.where(finishing, penalized, NEG_INF)
    new_keys, index = ops.top_k(keys, k)
    index = ops.cast(index, "int32")
    new_seqs = _extended(
        state.live_seqs,
        ops.take_along_axis(parents, index, axis=1),
        ops.take_along_axis(tokens, index, axis=1),
        step,
    )
    pool = ops.concatenate([state.finished_seqs, new_seqs], axis=1)
    pool_keys = ops.concatenate([state.finished_scores, new_keys], axis=1)
    pool_unmet = ops.concatenate([state.finished_unmet, _pick(unmet, index)], axis=1)
    finished_scores, kept = ops.top_k(pool_keys, k)
    kept = ops.cast(kept, "int32")
    return {
        "finished_seqs": _gather_beams(pool, kept),
        "finished_scores": finished_scores,
        "finished_unmet": _pick(pool_unmet, kept),
    }
