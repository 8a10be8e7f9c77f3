"""Beam search with the GNMT length penalty and finished-hypothesis bookkeeping (paper 6.1).

The whole decoding loop runs inside one compiled function (`jax.jit` or
`tf.function`), using the model's key/value cache (`DecodingCache`):
cross-attention keys and values are computed once per source, the
self-attention cache grows one position per step and is reordered when
beams are.

The loop variable is a `BeamState`. Each step (`_beam_step`) extends every
live beam by every token, keeps the `2 * beam_size` best continuations, and
splits them: those ending in EOS and ranked among the best `beam_size`
become finished hypotheses scored `log_prob / length_penalty(length)`
(length counts the EOS); the best `beam_size` that did not end stay live.
The best `beam_size` finished hypotheses are kept. One stop rule,
`beam_search_done`, says which sources are done; the loop runs while some
source is not done, up to the length limit (`source_length +
max_extra_length` output tokens, then EOS), and done sources may leave the
loop early (`drop_settled`).
"""

import dataclasses
from typing import Any

from keras import ops

from keras_transformer import backend
from keras_transformer.decoding.beam_state import BeamState
from keras_transformer.decoding.beam_stop_rule import beam_search_done
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


def length_penalty(length, alpha, rule="gnmt"):
    """The divisor of a finished hypothesis's log-probability.

    `"gnmt"` (paper 6.1): `((5 + length) / 6) ** alpha` (Wu et al., 2016).
    `"average"`: `length ** alpha`, the `length_penalty` of Hugging Face
    transformers' and fairseq's beam search (alpha 1 ranks by the average
    log-probability per token).
    """
    length = ops.cast(length, "float32")
    if rule == "average":
        return ops.power(length, alpha)
    return ops.power((5.0 + length) / 6.0, alpha)


@dataclasses.dataclass(frozen=True)
class _Settings:
    """The arguments of `build_beam_search`, checked, and what follows from them."""

    bos_id: int
    eos_id: int
    pad_id: int
    banned: tuple  # ids never generated: padding, BOS
    beam_size: int
    alpha: float
    length_penalty_rule: str
    max_extra_length: int
    num_results: int
    use_cache: bool
    settling_slot: int  # see `beam_search_done`
    drop_settled: bool

    def penalty(self, length):
        return length_penalty(length, self.alpha, self.length_penalty_rule)


@dataclasses.dataclass(frozen=True)
class _Bounds:
    """What a batch of sources fixes for its search."""

    num_steps: Any  # loop steps at most: source_length + max_extra_length + 1
    limits: Any  # (batch,) output tokens allowed before EOS
    max_penalty: Any  # (batch,) length penalty at the limit (EOS included)
    positions: Any  # (num_steps + 1,) 0, 1, ...
    prefix: Any = None  # (batch, prefix_length) forced first tokens, -1 padded; or None


def build_beam_search(
    model,
    decoding=None,
    *,
    bos_id,
    eos_id,
    use_cache=True,
    stop_rule="results",
    drop_settled=None,
    return_num_steps=False,
    **settings,
):
    """Returns `search(encoder_token_ids) -> (tokens, scores)`, one compiled program.

    Beam search of paper 6.1 (see the module docstring); it stops by
    `beam_search_done`. The registered strategy `"beam"` (`build_search`).

    Args:
        model: a `Seq2SeqTransformer`.
        decoding: a `DecodingConfig` (None: the paper's settings): `beam_size`,
            `alpha`, `length_penalty_rule`, `max_extra_length`, `num_results`
            (`<= beam_size`) are read; its `search` is not.
        bos_id: int. Begin-of-sentence id, the first decoder input.
        eos_id: int. End-of-sentence id.
        use_cache: bool. Decode with the key/value cache (default). `False`
            reruns the whole decoder every step: same results, slower; the
            reference the cache is tested and benchmarked against.
        stop_rule: `"results"` (default) settles a source on its `num_results`-th
            best finished hypothesis, `"beam"` on its `beam_size`-th (the same
            outputs after more steps, the reference); see `beam_search_done`.
        drop_settled: bool or None. Whether done sources leave the loop, so
            that later steps compute only the others (as CTranslate2 does).
            `None` (default): with the cache, where the backend's loop lets
            shapes change (`keras_transformer.backend.shrinking_batch`).
            `False` keeps every row to the end: the same outputs.
        return_num_steps: bool. Also return the loop's step count (int32 scalar).
        **settings: single `DecodingConfig` fields (e.g. `beam_size=5`),
            applied over `decoding`.

    Returns:
        A function taking int (batch, source_length) ids (and optionally a
        target prefix per source, int32 (batch, prefix_length) padded with
        -1, forced first: `forced_prefix`) and returning
        `tokens`, int32 (batch, num_results, source_length + max_extra_length + 1)
        with EOS and everything after it set to the padding id, and
        `scores`, float32 (batch, num_results), the length-penalized
        log-probabilities. A slot with no hypothesis (fewer than
        `num_results` distinct ones exist) has score -inf and no tokens.
        With `return_num_steps`, a third output: the loop's step count.

    Example:

    >>> search = build_beam_search(model, DecodingConfig(beam_size=5), bos_id=2, eos_id=3)
    """
    decoding = DecodingConfig.from_settings(decoding, **{**settings, "search": "beam"})
    settings = _check_settings(
        model,
        decoding,
        bos_id=bos_id,
        eos_id=eos_id,
        use_cache=use_cache,
        stop_rule=stop_rule,
        drop_settled=drop_settled,
    )

    def search(encoder_token_ids, *target_prefix):  # positional only: traced per arity
        prefix = target_prefix[0] if target_prefix else None
        tokens, scores, num_steps_run = _search(model, settings, encoder_token_ids, prefix)
        return (tokens, scores, num_steps_run) if return_num_steps else (tokens, scores)

    return compile_search(search, model)


# The strategy "beam" of `DecodingConfig.search`.
build_search = build_beam_search


def _check_settings(model, decoding, *, use_cache, stop_rule, drop_settled, **ids):
    """The `_Settings` of `build_beam_search`'s arguments (`ids`: `bos_id`, `eos_id`).

    Raises `ValueError` for bad ones (`decoding` checked its own).
    """
    if stop_rule not in ("results", "beam"):
        raise ValueError(f"`stop_rule` must be 'results' or 'beam'. Received: {stop_rule!r}")
    can_drop = use_cache and backend.shrinking_batch()
    if drop_settled and not can_drop:
        raise ValueError(
            "`drop_settled=True` needs `use_cache=True` and a backend whose decoding loops "
            "change shapes (tensorflow, torch; `keras_transformer.backend.shrinking_batch()` "
            f"is {backend.shrinking_batch()} here). Received: use_cache={use_cache}"
        )
    pad_id = model.config.pad_id
    return _Settings(
        **ids,
        pad_id=pad_id,
        banned=tuple(sorted({pad_id, ids["bos_id"]} - {ids["eos_id"]})),
        beam_size=decoding.beam_size,
        alpha=decoding.alpha,
        length_penalty_rule=decoding.length_penalty_rule,
        max_extra_length=decoding.max_extra_length,
        num_results=decoding.num_results,
        use_cache=use_cache,
        # Later hypotheses can only change the finished slots after this one.
        settling_slot=(
            decoding.num_results - 1 if stop_rule == "results" else decoding.beam_size - 1
        ),
        drop_settled=can_drop if drop_settled is None else drop_settled,
    )


def _search(model, s, encoder_token_ids, target_prefix=None):
    """One batch: `(tokens, scores, num_steps_run)`, as `build_beam_search` describes."""
    encoder_token_ids = ops.cast(encoder_token_ids, "int32")
    _, source_length = ops.shape(encoder_token_ids)
    num_steps = source_length + s.max_extra_length + 1  # the last one can only emit EOS
    limits = output_limits(encoder_token_ids, s.pad_id, s.max_extra_length)  # (batch,)
    bounds = _Bounds(
        num_steps=num_steps,
        limits=limits,
        max_penalty=s.penalty(limits + 1),  # (batch,)
        positions=ops.arange(num_steps + 1, dtype="int32"),
        prefix=None if target_prefix is None else ops.cast(target_prefix, "int32"),
    )

    def not_done(state):
        done = beam_search_done(state, bounds.max_penalty, s.settling_slot)
        return ops.logical_and(state.step < num_steps, ops.logical_not(ops.all(done)))

    def step_fn(state):
        state = _beam_step(model, s, bounds, state)
        return _drop_done_sources(s, bounds, state) if s.drop_settled else state

    state = _initial_state(model, s, bounds, encoder_token_ids)
    with model.fixed_decoder_weights():  # the loop's weights, prepared once
        state = decoding_loop(not_done, step_fn, state, num_steps, s.use_cache, reorders_cache=True)
    tokens, scores = _write_results(state, s.num_results)
    tokens = tokens[:, :, 1:]  # drop BOS
    # EOS and whatever follows it become padding; so do slots never filled
    # (only NEG_INF-seeded beams could reach them).
    ended = ops.cumsum(ops.cast(tokens == s.eos_id, "int32"), axis=-1) > 0
    empty = scores < NEG_INF / 2
    tokens = ops.where(ops.logical_or(ended, empty[:, :, None]), s.pad_id, tokens)
    scores = ops.where(empty, float("-inf"), scores)
    return tokens, scores, state.step


def _initial_state(model, s, bounds, encoder_token_ids):
    """The `BeamState` before the first step: one live beam (BOS) per source."""
    batch_size = ops.shape(encoder_token_ids)[0]
    k = s.beam_size
    # Each source is encoded once; its k beams read the same cross-attention keys.
    encoder_outputs = model.encode(encoder_token_ids)
    cache = start_decoding(
        model, encoder_outputs, encoder_token_ids, bounds.num_steps, s.use_cache, rows_per_source=k
    )
    # Only beam 0 is live at the start; the others would duplicate it.
    live_scores = ops.tile(
        ops.convert_to_tensor([[0.0] + [NEG_INF] * (k - 1)], "float32"), (batch_size, 1)
    )
    live_seqs = ops.where(bounds.positions == 0, s.bos_id, s.pad_id)
    live_seqs = ops.broadcast_to(
        ops.cast(live_seqs, "int32"), (batch_size, k, bounds.num_steps + 1)
    )
    finished_seqs = ops.zeros_like(live_seqs)
    finished_scores = ops.full((batch_size, k), NEG_INF, "float32")
    return BeamState(
        step=ops.convert_to_tensor(0, "int32"),
        live_seqs=live_seqs,
        live_scores=live_scores,
        finished_seqs=finished_seqs,
        finished_scores=finished_scores,
        sources=ops.arange(batch_size, dtype="int32"),
        result_seqs=finished_seqs[:, : s.num_results],
        result_scores=finished_scores[:, : s.num_results],
        cache=cache,
    )


def _beam_step(model, s, bounds, state):
    """One decoding step: the new live beams and finished hypotheses of every source."""
    k, step = s.beam_size, state.step
    beam_limits = ops.repeat(ops.take(bounds.limits, state.sources), k, axis=0)  # (sources * k,)
    buffer = ops.reshape(state.live_seqs, (-1, bounds.num_steps + 1))  # (sources * k, steps + 1)
    logits, cache = decode_step(model, buffer, step, state.cache, s.use_cache)
    log_probs = allowed_log_probs(logits, step, beam_limits, s.eos_id, s.banned)
    if bounds.prefix is not None:
        prefix = ops.repeat(ops.take(bounds.prefix, state.sources, axis=0), k, axis=0)
        log_probs = forced_prefix(log_probs, step, prefix, beam_limits)
    vocab = log_probs.shape[-1]
    # Every continuation of a source's beams ranked at once, beam-major: (sources, k * vocab).
    candidates = state.live_scores[:, :, None] + ops.reshape(log_probs, (-1, k, vocab))
    top_scores, top_ids = backend.top_k(ops.reshape(candidates, (-1, k * vocab)), 2 * k)
    top_beams = top_ids // vocab  # (sources, 2k)
    top_tokens = top_ids % vocab
    sequences = _gather_beams(state.live_seqs, top_beams)  # (sources, 2k, steps + 1)
    sequences = ops.where(
        bounds.positions[None, None, :] == step + 1, top_tokens[:, :, None], sequences
    )
    ends = top_tokens == s.eos_id

    # Live beams: the best k continuations that did not end.
    live_scores, live_slots = ops.top_k(ops.where(ends, NEG_INF, top_scores), k)
    parents = ops.take_along_axis(top_beams, live_slots, axis=1)  # (sources, k)
    offsets = ops.arange(ops.shape(parents)[0], dtype="int32")[:, None] * k
    cache = cache.follow_rows(ops.reshape(parents + offsets, (-1,)))

    # Finished hypotheses: merge the new ones into the k best so far.
    # An EOS continuation finishes only if it ranks among the k best
    # (as fairseq does): then beam size 1 is exactly greedy decoding.
    finishes = ops.logical_and(ends, ops.arange(2 * k)[None, :] < k)
    new_scores = ops.where(finishes, top_scores / s.penalty(step + 1), NEG_INF)
    pool = ops.concatenate([state.finished_seqs, sequences], axis=1)  # (sources, 3k, steps + 1)
    pool_scores = ops.concatenate([state.finished_scores, new_scores], axis=1)
    finished_scores, kept = ops.top_k(pool_scores, k)
    return state.replace(
        step=step + 1,
        live_seqs=_gather_beams(sequences, live_slots),
        live_scores=live_scores,
        finished_seqs=_gather_beams(pool, kept),
        finished_scores=finished_scores,
        cache=cache,
    )


def _drop_done_sources(s, bounds, state):
    """`state` without the sources `beam_search_done` marks; their results written out.

    A done source's returned hypotheses can no longer change: it leaves the
    loop, so later steps decode only the others. Nothing is dropped when none
    is done, or all are (the loop ends then).
    """
    done = beam_search_done(state, bounds.max_penalty, s.settling_slot)
    some = ops.logical_and(ops.any(done), ops.logical_not(ops.all(done)))

    def drop():
        result_seqs, result_scores = _write_results(state, s.num_results, which=done)
        keep = ops.nonzero(ops.logical_not(done))[0]  # (sources left,)
        k = s.beam_size
        rows = ops.reshape(keep[:, None] * k + ops.arange(k, dtype="int32")[None, :], (-1,))
        per_source = {
            name: ops.take(getattr(state, name), keep, axis=0)
            for name in ("live_seqs", "live_scores", "finished_seqs", "finished_scores", "sources")
        }
        return state.replace(
            **per_source,
            result_seqs=result_seqs,
            result_scores=result_scores,
            cache=state.cache.keep_sources(keep, rows),
        )

    return ops.cond(some, drop, lambda: state)


def _write_results(state, num_results, which=None):
    """The batch's outputs with the first results of `state.sources` (those `which`) written."""
    finished_seqs, finished_scores, sources = (
        state.finished_seqs,
        state.finished_scores,
        state.sources,
    )
    if which is not None:
        index = ops.nonzero(which)[0]
        finished_seqs, finished_scores, sources = (
            ops.take(t, index, axis=0) for t in (finished_seqs, finished_scores, sources)
        )
    index = sources[:, None]
    result_seqs = ops.scatter_update(state.result_seqs, index, finished_seqs[:, :num_results])
    scores = ops.scatter_update(state.result_scores, index, finished_scores[:, :num_results])
    return result_seqs, scores


def _gather_beams(tensor, indices):
    """tensor (batch, beams, ...) -> (batch, len(indices[0]), ...) along the beam axis."""
    batch, beams, *rest = ops.shape(tensor)
    # Whole rows of the flattened (batch * beams, ...) tensor: one slice per beam.
    rows = indices + ops.arange(batch, dtype="int32")[:, None] * beams
    gathered = ops.take(ops.reshape(tensor, (-1, *rest)), ops.reshape(rows, (-1,)), axis=0)
    width = indices.shape[1] if indices.shape[1] is not None else -1  # static where known
    return ops.reshape(gathered, (batch, width, *rest))


def beam_search(model, encoder_token_ids, **kwargs):
    """Beam search on one batch; see `build_beam_search` for the arguments.

    Builds (and compiles) a new search each call: keep the function from
    `build_beam_search` to decode many batches.

    Example:

    >>> tokens, scores = beam_search(model, source_ids, bos_id=2, eos_id=3)
    """
    return build_beam_search(model, **kwargs)(encoder_token_ids)
