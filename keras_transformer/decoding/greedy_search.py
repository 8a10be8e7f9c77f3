"""Greedy decoding with the key/value cache."""

from typing import Any, NamedTuple

from keras import ops

from keras_transformer import backend
from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.decoding.search_steps import (
    allowed_log_probs,
    compile_search,
    decode_step,
    decoding_loop,
    forced_prefix,
    output_limits,
    start_decoding,
)


class GreedyState(NamedTuple):
    """The loop variable of greedy search.

    Attributes:
        step: int32 scalar, the tokens generated so far.
        tokens: int32 (batch, num_steps + 1), BOS then the tokens chosen.
        done: bool (batch,), rows that emitted EOS.
        scores: float32 (batch,), the chosen tokens' summed log-probabilities.
        cache: the `DecodingCache` of `start_decoding`.
    """

    step: Any
    tokens: Any
    done: Any
    scores: Any
    cache: Any

    def replace(self, **fields):
        """The state with `fields` replaced."""
        return self._replace(**fields)


def build_greedy_search(model, decoding=None, *, bos_id, eos_id, use_cache=True, **settings):
    """Returns `search(encoder_token_ids) -> (tokens, scores)`, one compiled program.

    Picks the most probable token at every step, under the same rules as beam
    search (no padding or BOS generated, at most `source_length +
    max_extra_length` tokens then EOS), and stops when every row has ended.

    Args:
        model: a `Seq2SeqTransformer`.
        decoding: a `DecodingConfig` (None: the defaults); its
            `max_extra_length` is read (`num_results` must be 1).
        bos_id: int. Begin-of-sentence id.
        eos_id: int. End-of-sentence id.
        use_cache: bool. Decode with the key/value cache (default), or rerun
            the whole decoder every step (the reference for tests/benchmarks).
        **settings: single `DecodingConfig` fields, applied over `decoding`.

    Returns:
        A function taking int (batch, source_length) ids (and optionally a
        target prefix, int32 (batch, prefix_length) padded with -1, forced
        first: `forced_prefix`) and returning
        `tokens`, int32 (batch, source_length + max_extra_length + 1), EOS and
        what follows set to padding, and `scores`, float32 (batch,), the sum
        of the chosen tokens' log-probabilities (EOS included).

    Example:

    >>> tokens, scores = build_greedy_search(model, bos_id=2, eos_id=3)(source_ids)
    """
    decoding = DecodingConfig.from_settings(decoding, **{**settings, "search": "greedy"})
    max_extra_length = decoding.max_extra_length
    pad_id = model.config.pad_id
    banned = tuple(sorted({pad_id, bos_id} - {eos_id}))

    def search(encoder_token_ids, *target_prefix):  # positional only: traced per arity
        target_prefix = target_prefix[0] if target_prefix else None
        encoder_token_ids = ops.cast(encoder_token_ids, "int32")
        batch_size, source_length = ops.shape(encoder_token_ids)
        num_steps = source_length + max_extra_length + 1
        limits = output_limits(encoder_token_ids, pad_id, max_extra_length)
        cache = start_decoding(
            model, model.encode(encoder_token_ids), encoder_token_ids, num_steps, use_cache
        )
        positions = ops.arange(num_steps + 1, dtype="int32")
        tokens = ops.where(positions[None, :] == 0, bos_id, pad_id)
        tokens = ops.cast(ops.broadcast_to(tokens, (batch_size, num_steps + 1)), "int32")

        def not_done(state):
            return ops.logical_and(state.step < num_steps, ops.logical_not(ops.all(state.done)))

        def step_fn(state):
            step = state.step
            logits, cache = decode_step(model, state.tokens, step, state.cache, use_cache)
            log_probs = allowed_log_probs(logits, step, limits, eos_id, banned)
            log_probs = forced_prefix(log_probs, step, target_prefix, limits)
            log_probs, token_ids = backend.top_k(log_probs, 1)
            chosen, chosen_log_prob = token_ids[:, 0], log_probs[:, 0]  # (batch,)
            return next_greedy_state(
                state, chosen, chosen_log_prob, cache, positions, (pad_id, eos_id)
            )

        state = GreedyState(
            step=ops.convert_to_tensor(0, "int32"),
            tokens=tokens,
            done=ops.zeros((batch_size,), "bool"),
            scores=ops.zeros((batch_size,), "float32"),
            cache=cache,
        )
        with model.fixed_decoder_weights():  # the loop's weights, prepared once
            state = decoding_loop(not_done, step_fn, state, num_steps, use_cache)
        return padded_after_eos(state.tokens[:, 1:], eos_id, pad_id), state.scores

    return compile_search(search, model)


def next_greedy_state(state, chosen, chosen_log_prob, cache, positions, ids):
    """The state after one token a row (greedy's best, or a sample) is taken.

    Args:
        state: the `GreedyState` of this step.
        chosen: (rows,) int32, each row's next token.
        chosen_log_prob: (rows,) float32, its log-probability.
        cache: the decoding cache after this step.
        positions: (length,) int32, the token positions (0, 1, ...).
        ids: `(pad_id, eos_id)`.

    Returns:
        `GreedyState`: finished rows take padding and keep their score.
    """
    pad_id, eos_id = ids
    step, done = state.step, state.done
    chosen = ops.where(done, pad_id, chosen)
    return GreedyState(
        step=step + 1,
        tokens=ops.where(positions[None, :] == step + 1, chosen[:, None], state.tokens),
        done=ops.logical_or(done, chosen == eos_id),
        scores=state.scores + ops.where(done, 0.0, chosen_log_prob),
        cache=cache,
    )


def padded_after_eos(tokens, eos_id, pad_id):
    """`tokens` (rows, length) with padding from each row's first EOS on."""
    ended = ops.cumsum(ops.cast(tokens == eos_id, "int32"), axis=-1) > 0
    return ops.where(ended, pad_id, tokens)


def build_search(model, decoding, *, bos_id, eos_id, **options):
    """The strategy "greedy" of `DecodingConfig.search`: `build_greedy_search` with a results
    axis, `tokens` (batch, 1, length) and `scores` (batch, 1), as every strategy returns."""
    greedy = build_greedy_search(model, decoding, bos_id=bos_id, eos_id=eos_id, **options)

    def one_result(encoder_token_ids, *target_prefix):
        tokens, scores = greedy(encoder_token_ids, *target_prefix)
        return tokens[:, None], scores[:, None]

    return one_result
