"""Beam search with the GNMT length penalty and finished-hypothesis bookkeeping (paper 6.1)."""

from keras import ops

from keras_transformer import backend
from keras_transformer.decoding.length_penalty_rules import LENGTH_PENALTY_RULES
from keras_transformer.decoding.search_state import (
    NEG_INF,
    best_next_tokens,
    compile_search,
    decode_step,
    decoding_loop,
    keep_sources,
    output_limits,
    reorder_state,
    start_decoding,
)
from keras_transformer.utils.numeric_settings import check_decoding_settings


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


def _gather_beams(tensor, indices):
    """tensor (batch, beams, ...) -> (batch, len(indices[0]), ...) along the beam axis."""
    shape = ops.shape(tensor)
    expanded = ops.reshape(indices, (*ops.shape(indices), *([1] * (len(shape) - 2))))
    expanded = ops.broadcast_to(expanded, (*ops.shape(indices), *shape[2:]))
    return ops.take_along_axis(tensor, expanded, axis=1)


def build_beam_search(
    model,
    *,
    bos_id,
    eos_id,
    beam_size=4,
    alpha=0.6,
    length_penalty_rule="gnmt",
    max_extra_length=50,
    num_results=1,
    use_cache=True,
    stop_rule="results",
    drop_settled=None,
    return_num_steps=False,
):
    """Returns `search(encoder_token_ids) -> (tokens, scores)`, one compiled program.

    The whole decoding loop runs inside the compiled function (`jax.jit` or
    `tf.function`), using the model's key/value cache: cross-attention keys
    and values are computed once per source, the self-attention cache grows
    one position per step and is reordered when beams are.

    Each step extends every live beam by every token, keeps the `2 * beam_size`
    best continuations, and splits them: those ending in EOS and ranked among
    the best `beam_size` become finished hypotheses scored
    `log_prob / ((5 + length) / 6) ** alpha` (length counts the EOS; or
    `log_prob / length ** alpha` with `length_penalty_rule="average"`); the best
    `beam_size` that did not end stay live. The best `beam_size`
    finished hypotheses are kept. A row is settled when its `num_results`-th
    best finished hypothesis scores at least the best score any live beam
    could still reach (`log_prob / penalty(max_length)`: log-probabilities
    only fall and the penalty only grows), so the hypotheses returned can no
    longer change; the loop stops when every row is settled, or at the length
    limit: `source_length + max_extra_length` output tokens, then EOS.

    Args:
        model: a `Seq2SeqTransformer`.
        bos_id: int. Begin-of-sentence id, the first decoder input.
        eos_id: int. End-of-sentence id.
        beam_size: int. Beams per source (paper: 4).
        alpha: float. Length penalty exponent (paper: 0.6); 0 ranks by raw
            log-probability.
        length_penalty_rule: `"gnmt"` (paper: `((5 + length) / 6) ** alpha`)
            or `"average"` (`length ** alpha`, transformers' and fairseq's
            `length_penalty`); see `length_penalty`.
        max_extra_length: int. Output tokens allowed beyond the source length
            (paper: 50).
        num_results: int. Hypotheses returned per source, best first
            (`<= beam_size`).
        use_cache: bool. Decode with the key/value cache (default). `False`
            reruns the whole decoder every step: same results, slower; kept
            as the reference the cache is tested and benchmarked against.
        stop_rule: `"results"` (default) settles a row on its `num_results`-th
            best finished hypothesis, as described above. `"beam"` waits for
            the `beam_size`-th (the rule of tensor2tensor and flax): the same
            outputs after more steps; kept as the reference the default is
            tested and benchmarked against.
        drop_settled: bool or None. Whether settled sources leave the loop, so
            that later steps compute only the rows still decoding (as
            CTranslate2 does). `None` (default): with the cache, where the
            backend's loop lets shapes change (TensorFlow, torch:
            `keras_transformer.backend.shrinking_batch`). `False` keeps every
            row to the end: the same outputs, kept as the reference.
        return_num_steps: bool. Also return the number of decoding steps the
            loop ran (int32 scalar), for benchmarks and tests.

    Returns:
        A function taking int (batch, source_length) ids and returning
        `tokens`, int32 (batch, num_results, source_length + max_extra_length + 1)
        with EOS and everything after it set to the padding id, and
        `scores`, float32 (batch, num_results), the length-penalized
        log-probabilities. A slot with no hypothesis (fewer than
        `num_results` distinct ones exist) has score -inf and no tokens.
        With `return_num_steps`, a third output: the loop's step count.
    """
    if not 1 <= num_results <= beam_size:
        raise ValueError(
            f"`num_results` must be in [1, beam_size={beam_size}]. Received: {num_results}"
        )
    if length_penalty_rule not in LENGTH_PENALTY_RULES:
        raise ValueError(
            f"`length_penalty_rule` must be one of {LENGTH_PENALTY_RULES}. "
            f"Received: {length_penalty_rule!r}"
        )
    if stop_rule not in ("results", "beam"):
        raise ValueError(f"`stop_rule` must be 'results' or 'beam'. Received: {stop_rule!r}")
    # The finished slot whose score settles a row: later hypotheses can only
    # change the slots after it.
    settling_slot = num_results - 1 if stop_rule == "results" else beam_size - 1
    check_decoding_settings(beam_size=beam_size, alpha=alpha, max_extra_length=max_extra_length)
    can_drop = use_cache and backend.shrinking_batch()
    if drop_settled is None:
        drop_settled = can_drop
    elif drop_settled and not can_drop:
        raise ValueError(
            "`drop_settled=True` needs `use_cache=True` and a backend whose decoding loops "
            "change shapes (tensorflow, torch; `keras_transformer.backend.shrinking_batch()` "
            f"is {backend.shrinking_batch()} here). Received: use_cache={use_cache}"
        )
    pad_id = model.config.pad_id
    banned = tuple(sorted({pad_id, bos_id} - {eos_id}))

    def search(encoder_token_ids):
        encoder_token_ids = ops.cast(encoder_token_ids, "int32")
        batch_size, source_length = ops.shape(encoder_token_ids)
        num_steps = source_length + max_extra_length + 1  # the last one can only emit EOS
        k = beam_size
        limits = output_limits(encoder_token_ids, pad_id, max_extra_length)  # (batch,)
        max_penalty = length_penalty(limits + 1, alpha, length_penalty_rule)  # (batch,)

        # Each source is encoded once; its k beams read the same cross-attention keys.
        encoder_outputs = model.encode(encoder_token_ids)
        cache = start_decoding(
            model, encoder_outputs, encoder_token_ids, num_steps, use_cache, rows_per_source=k
        )
        # Only beam 0 is live at the start; the others would duplicate it.
        alive_log_probs = ops.tile(
            ops.convert_to_tensor([[0.0] + [NEG_INF] * (k - 1)], "float32"), (batch_size, 1)
        )
        positions = ops.arange(num_steps + 1, dtype="int32")
        alive = ops.where(positions == 0, bos_id, pad_id)
        alive = ops.broadcast_to(ops.cast(alive, "int32"), (batch_size, k, num_steps + 1))
        finished = ops.zeros_like(alive)
        finished_scores = ops.full((batch_size, k), NEG_INF, "float32")
        # The loop state holds the sources not yet settled (all of them unless
        # settled ones are dropped): `sources` are their rows in the batch.
        sources = ops.arange(batch_size, dtype="int32")

        def settled_rows(alive_log_probs, finished_scores, sources):
            best_possible = alive_log_probs[:, 0] / ops.take(max_penalty, sources)  # (sources,)
            return finished_scores[:, settling_slot] >= best_possible

        def not_done(step, alive, alive_log_probs, finished, finished_scores, sources, *_):
            settled = ops.all(settled_rows(alive_log_probs, finished_scores, sources))
            return ops.logical_and(step < num_steps, ops.logical_not(settled))

        def step_fn(step, alive, alive_log_probs, finished, finished_scores, sources, *outputs):
            *results, cache = outputs
            beam_limits = ops.repeat(ops.take(limits, sources), k, axis=0)  # (sources * k,)
            buffer = ops.reshape(alive, (-1, num_steps + 1))  # (sources * k, steps + 1)
            logits, cache = decode_step(model, buffer, step, cache, use_cache)
            # A source's 2k best continuations are among its beams' 2k best tokens each.
            log_probs, token_ids = best_next_tokens(
                logits, step, beam_limits, eos_id, banned, 2 * k
            )  # (sources * k, m)
            m = ops.shape(log_probs)[-1]
            candidates = alive_log_probs[:, :, None] + ops.reshape(log_probs, (-1, k, m))
            top_log_probs, top_ids = ops.top_k(ops.reshape(candidates, (-1, k * m)), 2 * k)
            top_beams = top_ids // m  # (sources, 2k)
            top_tokens = ops.take_along_axis(ops.reshape(token_ids, (-1, k * m)), top_ids, axis=1)
            sequences = _gather_beams(alive, top_beams)  # (sources, 2k, steps + 1)
            sequences = ops.where(
                positions[None, None, :] == step + 1, top_tokens[:, :, None], sequences
            )
            ends = top_tokens == eos_id

            # Live beams: the best k continuations that did not end.
            alive_log_probs, alive_slots = ops.top_k(ops.where(ends, NEG_INF, top_log_probs), k)
            alive = _gather_beams(sequences, alive_slots)
            parents = ops.take_along_axis(top_beams, alive_slots, axis=1)  # (sources, k)
            offsets = ops.arange(ops.shape(parents)[0], dtype="int32")[:, None] * k
            cache = reorder_state(cache, ops.reshape(parents + offsets, (-1,)))

            # Finished hypotheses: merge the new ones into the k best so far.
            # An EOS continuation finishes only if it ranks among the k best
            # (as fairseq does): then beam size 1 is exactly greedy decoding.
            finishes = ops.logical_and(ends, ops.arange(2 * k)[None, :] < k)
            new_scores = ops.where(
                finishes,
                top_log_probs / length_penalty(step + 1, alpha, length_penalty_rule),
                NEG_INF,
            )
            pool = ops.concatenate([finished, sequences], axis=1)  # (sources, 3k, steps + 1)
            pool_scores = ops.concatenate([finished_scores, new_scores], axis=1)
            finished_scores, kept = ops.top_k(pool_scores, k)
            finished = _gather_beams(pool, kept)
            state = (alive, alive_log_probs, finished, finished_scores, sources, *results, cache)
            if drop_settled:
                settled = settled_rows(alive_log_probs, finished_scores, sources)
                # All settled ends the loop: nothing left to drop.
                some = ops.logical_and(ops.any(settled), ops.logical_not(ops.all(settled)))
                state = ops.cond(some, lambda: drop_settled_sources(settled, *state), lambda: state)
            return step + 1, *state

        def drop_settled_sources(settled, alive, alive_log_probs, finished, finished_scores,
                                 sources, results, result_scores, cache):  # fmt: skip
            # A settled source's returned hypotheses can no longer change: it
            # leaves the loop, its results written to the batch's outputs.
            results, result_scores = write_results(
                results, result_scores, finished, finished_scores, sources, settled
            )
            keep = ops.nonzero(ops.logical_not(settled))[0]  # (sources left,)
            rows = ops.reshape(keep[:, None] * k + ops.arange(k, dtype="int32")[None, :], (-1,))
            per_source = (alive, alive_log_probs, finished, finished_scores, sources)
            left = [ops.take(t, keep, axis=0) for t in per_source]
            return (*left, results, result_scores, keep_sources(cache, keep, rows))

        state = (
            ops.convert_to_tensor(0, "int32"),
            alive,
            alive_log_probs,
            finished,
            finished_scores,
            sources,
            finished[:, :num_results],  # the outputs, of sources that left the loop
            finished_scores[:, :num_results],
            cache,
        )
        with model.fixed_decoder_weights():  # the loop's weights, prepared once
            state = decoding_loop(not_done, step_fn, state, num_steps, use_cache)
        num_steps_run, _, _, finished, finished_scores, sources, tokens, scores, _ = state
        tokens, scores = write_results(tokens, scores, finished, finished_scores, sources)
        tokens = tokens[:, :, 1:]  # drop BOS
        # EOS and whatever follows it become padding; so do slots never filled
        # (only NEG_INF-seeded beams could reach them).
        ended = ops.cumsum(ops.cast(tokens == eos_id, "int32"), axis=-1) > 0
        empty = scores < NEG_INF / 2
        tokens = ops.where(ops.logical_or(ended, empty[:, :, None]), pad_id, tokens)
        scores = ops.where(empty, float("-inf"), scores)
        if return_num_steps:
            return tokens, scores, num_steps_run
        return tokens, scores

    def write_results(results, result_scores, finished, finished_scores, sources, which=None):
        """The batch's outputs with the first results of `sources` (those `which`) written."""
        if which is not None:
            index = ops.nonzero(which)[0]
            finished, finished_scores, sources = (
                ops.take(t, index, axis=0) for t in (finished, finished_scores, sources)
            )
        index = sources[:, None]
        results = ops.scatter_update(results, index, finished[:, :num_results])
        return results, ops.scatter_update(result_scores, index, finished_scores[:, :num_results])

    return compile_search(search, model)


def beam_search(model, encoder_token_ids, **kwargs):
    """Beam search on one batch; see `build_beam_search` for the arguments.

    Builds (and compiles) a new search each call: keep the function from
    `build_beam_search` to decode many batches.

    Example:

    >>> tokens, scores = beam_search(model, source_ids, bos_id=2, eos_id=3)
    """
    return build_beam_search(model, **kwargs)(encoder_token_ids)
