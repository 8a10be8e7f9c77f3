"""What greedy and beam search share: source lengths, token masks, the loop, compilation."""

import itertools

import keras
import numpy as np
from keras import ops

from keras_transformer import backend
from keras_transformer.layers.decoding_cache import DecodingCache
from keras_transformer.layers.masks import padding_mask

# Finite stand-in for -inf: sums and divisions of it stay finite, so no NaN appears.
NEG_INF = -1.0e9

# Positions of the first fixed-length cache buffer (`cache_stages`).
FIRST_CACHE_STAGE = 16


def output_limits(encoder_token_ids, pad_id, max_extra_length):
    """Maximum number of output tokens per row (EOS not counted): source length + extra.

    The source length counts every non-padding token (an appended EOS included).
    A row with no source token gets 0: an empty source yields an empty output.
    """
    source_lengths = ops.sum(ops.cast(ops.not_equal(encoder_token_ids, pad_id), "int32"), axis=1)
    return ops.where(source_lengths > 0, source_lengths + max_extra_length, 0)  # (batch,)


def allowed_log_probs(logits, step, limits, eos_id, banned_ids):
    """Each row's log-softmax with the decoding rules applied: float32 (rows, vocab).

    `banned_ids` (padding, begin-of-sentence) are never generated: their
    entries become `NEG_INF`. A row that reached its length limit
    (`step >= limit`) may only emit EOS: EOS gets log-probability 0, every
    other id `NEG_INF`. The rules are elementwise, so a compiler fuses them
    into the log-softmax's own pass over the row.

    Args:
        logits: (rows, vocab) logits.
        step: scalar int, the number of tokens generated so far.
        limits: (rows,) int, the output limit of each row.
        eos_id: int.
        banned_ids: tuple of int.
    """
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    vocab = log_probs.shape[-1]
    banned = np.zeros((1, vocab), bool)
    banned[0, [i for i in banned_ids if i < vocab]] = True
    at_limit_row = np.full((1, vocab), NEG_INF, "float32")
    at_limit_row[0, eos_id] = 0.0
    log_probs = ops.where(banned, NEG_INF, log_probs)
    at_limit = ops.greater_equal(step, limits)[:, None]  # (rows, 1)
    return ops.where(at_limit, at_limit_row, log_probs)


def forced_prefix(log_probs, step, prefix, limits):
    """`log_probs` with each row's target prefix forced: only its token at `step` allowed.

    While `step` is within a row's prefix (and below its length limit), every
    token but the prefix's gets `NEG_INF`; the forced token keeps its
    log-probability, so scores stay the output's log-probability. Padding in
    `prefix` ends a row's prefix (an empty row forces nothing).

    Args:
        log_probs: float32 (rows, vocab), `allowed_log_probs`.
        step: scalar int, the tokens generated so far.
        prefix: None (nothing forced) or int32 (rows, prefix_length), each
            row's forced ids padded with -1.
        limits: (rows,) int, the output limit of each row.

    Returns:
        float32 (rows, vocab).
    """
    if prefix is None:
        return log_probs
    width = ops.shape(prefix)[1]
    position = ops.minimum(step, width - 1)
    forced = ops.take(prefix, position, axis=1)  # (rows,)
    forcing = ops.logical_and(step < width, forced >= 0)
    forcing = ops.logical_and(forcing, ops.less(step, limits))[:, None]
    vocab = ops.arange(log_probs.shape[-1], dtype="int32")[None, :]
    only_forced = ops.where(vocab == forced[:, None], log_probs, NEG_INF)
    return ops.where(forcing, only_forced, log_probs)


def best_next_tokens(logits, step, limits, eos_id, banned_ids, count):
    """The `count` most probable next tokens of each row under the decoding rules.

    Args:
        logits, step, limits, eos_id, banned_ids: as `allowed_log_probs`.
        count: int, the tokens wanted per row.

    Returns:
        `log_probs`, float32 (rows, count), and `token_ids`, int32 (rows,
        count): the best entries of `allowed_log_probs`, best first (ties to
        the lower id).
    """
    log_probs = allowed_log_probs(logits, step, limits, eos_id, banned_ids)
    return backend.top_k(log_probs, count)


def start_decoding(
    model, encoder_outputs, encoder_token_ids, num_steps, use_cache, rows_per_source=1
):
    """The `DecodingCache` of a search: the model's, or the encoder output for uncached decoding.

    `rows_per_source` target rows (beams) follow each source row, consecutively.
    Uncached decoding grows nothing: its fixed part holds the encoder output
    and mask, with a row per target row (`decode_sequence` reads them so).
    """
    if use_cache:
        # A cache that grows starts empty; fixed buffers start at the first stage's length.
        capacity = 0 if backend.growing_cache() else cache_stages(num_steps)[0]
        return model.initialize_cache(
            encoder_outputs, encoder_token_ids, max_length=capacity, rows_per_source=rows_per_source
        )
    encoder_outputs = ops.repeat(encoder_outputs, rows_per_source, axis=0)
    encoder_token_ids = ops.repeat(encoder_token_ids, rows_per_source, axis=0)
    mask = padding_mask(encoder_token_ids, model.config.pad_id)
    return DecodingCache(
        growing=(), fixed={"encoder_outputs": encoder_outputs, "encoder_padding_mask": mask}
    )


def decode_step(model, tokens, step, cache, use_cache):
    """Logits for the token after position `step` of the (rows, num_steps + 1) buffer.

    Cached: one decoder step on the token at `step`, extending the cache.
    Uncached: the whole decoder over the buffer, every step (the causal mask
    makes position `step` ignore the not-yet-written positions after it); the
    baseline the cache is measured against.
    """
    if use_cache:
        current = ops.take(tokens, step, axis=1)[:, None]  # (rows, 1)
        logits, cache = model.decode(current, cache, step)
        return logits[:, 0], cache
    logits = model.decode_sequence(
        tokens[:, :-1], cache.fixed["encoder_outputs"], cache.fixed["encoder_padding_mask"]
    )
    return ops.take(logits, step, axis=1), cache


def cache_stages(num_steps):
    """Lengths of the fixed self-attention buffers, one loop each (JAX).

    A compiled loop keeps its shapes, so where the cache cannot grow
    (`keras_transformer.backend.growing_cache`) its buffers get a fixed
    length, doubled in stages: 16 positions, 32, 64, ... and finally all
    `num_steps` (at least 1.5 times the stage before). Reordering beams and
    attending copy and read the whole buffer at every step, so a step pays
    for at most about twice the positions written so far, and a batch whose
    translations end early (as a trained model's do, long before the limit
    of source length + 50) never pays for the limit. The loop body compiles
    once per stage: up to 3 times for sources of 16 tokens, 5 for 256.
    """
    stages = []
    capacity = FIRST_CACHE_STAGE
    while capacity * 3 // 2 <= num_steps:  # the last stage is at least half as long again
        stages.append(capacity)
        capacity *= 2
    return (*stages, num_steps)


def decoding_loop(not_done, step_fn, state, num_steps, use_cache, reorders_cache=False):
    """`while not_done(state): state = step_fn(state)`, in the cache's stages.

    `state` is one loop variable, a `NamedTuple` with fields `step` (the
    step number) and `cache` (a `DecodingCache`). Between stages
    (`cache_stages`) the growing cache is extended with empty positions.

    A stage whose step reorders a large cache (`reorders_cache`, where
    `keras_transformer.backend.paired_beam_steps` says so) runs two steps per
    iteration if it starts at an even step and, unless it is the last, ends
    at one (as every stage of `cache_stages` does). Such a stage stops after
    the first of two steps only when the whole search is done: then every
    field but the cache keeps the first step's value, and the second step's
    cache, never read again, is kept as it is (selecting between the two
    would copy it).

    Returns:
        The final state, that of one step per iteration but for its cache.
    """
    stages = cache_stages(num_steps) if use_cache and not backend.growing_cache() else ()
    start = 0
    for capacity, following in itertools.pairwise(stages):

        def within_stage(state, capacity=capacity):
            return ops.logical_and(state.step < capacity, not_done(state))

        paired = reorders_cache and start % 2 == 0 and capacity % 2 == 0
        state = _loop(within_stage, step_fn, state, paired)
        state = state.replace(cache=state.cache.extend(following - capacity))
        start = capacity
    return _loop(not_done, step_fn, state, reorders_cache and start % 2 == 0)


def _loop(not_done, step_fn, state, pairable):
    """`backend.decoding_loop` over the one loop variable `state` (passed as a 1-tuple).

    Two steps per iteration where `pairable` and the backend pairs steps over
    this cache (see `decoding_loop`).
    """
    if pairable and backend.paired_beam_steps(state.cache):
        step_fn = _two_steps(not_done, step_fn)
    (state,) = backend.decoding_loop(not_done, lambda state: (step_fn(state),), (state,))
    return state


def _two_steps(not_done, step_fn):
    """`step_fn` twice; the second step's fields, but for the cache, kept only if `not_done`."""

    def two_steps(state):
        first = step_fn(state)
        second = step_fn(first)
        go = not_done(first)
        kept = keras.tree.map_structure(
            lambda a, b: ops.where(go, a, b), second.replace(cache=()), first.replace(cache=())
        )
        return kept.replace(cache=second.cache)

    return two_steps


def compile_search(function, model):
    """Compiles `function(*tensors)`, whose decoding loop calls `model`, as one program.

    Each backend's compilation (`keras_transformer.backend.compile_search`)
    with the model's variables read at each call, so later weight updates are
    seen.

    Returns a callable with the signature of `function`; on JAX it compiles
    once per new input shape, on TensorFlow once for all.
    """
    if not model.built:  # variables must exist before tracing
        model.build()
    return backend.compile_search(function, model.variables)
