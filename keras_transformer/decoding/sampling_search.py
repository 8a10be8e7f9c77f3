"""Sampling: each output token drawn from the model's distribution, with the key/value cache.

Ancestral sampling, as back-translation uses it (Edunov et al., 2018): at each
step the next token of each of `num_results` samples per source is drawn from
the model's distribution under the rules of beam search (no padding or BOS
generated, EOS at the length limit), reshaped by `temperature`, then `top_k`,
then `top_p` (nucleus sampling, Holtzman et al., 2020): `sampling_log_probs`.

A draw is Gumbel-max: the token maximizing `log p + G`, `G = -log(-log(U))`
with `U` uniform, is distributed as `p`. `U` comes from a counter-based hash
(`keyed_hash`) of the seed, the step, the token, the sample's index and the
source's own ids: no generator state is carried, so the same program compiles
under `jax.jit` and in TensorFlow graphs, and a source's samples depend on the
seed and its ids alone, not on the batch it is decoded in, its padding or the
backend (but for floating-point near-ties between backends).
"""

from keras import ops

from keras_transformer import backend
from keras_transformer.decoding.decoding_config import DecodingConfig
from keras_transformer.decoding.greedy_search import (
    GreedyState,
    next_greedy_state,
    padded_after_eos,
)
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
from keras_transformer.layers.dropout import keyed_hash


def sampling_log_probs(log_probs, temperature=1.0, top_k=0, top_p=1.0):
    """The log-probabilities sampled from: `log_probs` divided by `temperature`, then filtered.

    Entries at or below `NEG_INF / 2` (banned tokens) stay `NEG_INF`. After
    the temperature, `top_k` > 0 keeps the `top_k` most probable tokens
    (ties with the k-th included) and `top_p` < 1 the fewest most probable
    tokens whose probabilities sum to at least `top_p` (ties with the last
    included); the others get `NEG_INF`, and the kept ones are normalized.

    Args:
        log_probs: float32 (rows, vocab) log-probabilities.
        temperature: float > 0.
        top_k: int >= 0; 0 keeps all.
        top_p: float in (0, 1]; 1 keeps all.

    Returns:
        float32 (rows, vocab), a log-softmax over the kept tokens.

    Example:

    >>> probs = ops.exp(sampling_log_probs(ops.log([[0.5, 0.3, 0.2]]), top_p=0.6))
    [[0.625, 0.375, 0.0]]
    """
    allowed = log_probs > NEG_INF / 2
    scaled = ops.where(allowed, log_probs / temperature, NEG_INF)
    vocab = log_probs.shape[-1]
    if 0 < top_k < vocab:
        kth = backend.top_k(scaled, top_k)[0][:, -1:]
        scaled = ops.where(scaled >= kth, scaled, NEG_INF)
    scaled = ops.log_softmax(scaled, axis=-1)
    if top_p < 1:
        probs = ops.exp(scaled)
        descending = -ops.sort(-probs, axis=-1)
        before = ops.cumsum(descending, axis=-1) - descending  # mass of the more probable
        # A mass within float32 rounding of `top_p` reaches it; the most probable always stays.
        kept = before < top_p - 1e-6
        smallest = ops.min(ops.where(kept, descending, 2.0), axis=-1, keepdims=True)
        smallest = ops.minimum(smallest, descending[:, :1])
        scaled = ops.log_softmax(ops.where(probs >= smallest, scaled, NEG_INF), axis=-1)
    return scaled


def build_sampling_search(model, decoding=None, *, bos_id, eos_id, use_cache=True, **settings):
    """Returns `search(encoder_token_ids) -> (tokens, scores)`, one compiled program.

    Draws `num_results` samples per source (see the module docstring) and
    stops when every sample has ended. The registered strategy `"sampling"`.

    Args:
        model: a `Seq2SeqTransformer`.
        decoding: a `DecodingConfig` (None: the defaults): `temperature`,
            `top_k`, `top_p`, `sampling_seed`, `num_results` (the samples
            per source) and `max_extra_length` are read.
        bos_id: int. Begin-of-sentence id.
        eos_id: int. End-of-sentence id.
        use_cache: bool. Decode with the key/value cache (default), or rerun
            the whole decoder every step (the reference).
        **settings: single `DecodingConfig` fields, applied over `decoding`.

    Returns:
        A function taking int (batch, source_length) ids (and optionally a
        target prefix per source, as `forced_prefix` reads it) and returning
        `tokens`, int32 (batch, num_results, source_length +
        max_extra_length + 1), EOS and what follows set to padding, and
        `scores`, float32 (batch, num_results): each sample's log-probability
        under the model (temperature 1, nothing filtered, EOS included), the
        samples of a source ordered by it, most probable first.

    Example:

    >>> search = build_sampling_search(model, bos_id=2, eos_id=3, top_p=0.9, num_results=4)
    >>> tokens, scores = search(source_ids)  # (batch, 4, length), (batch, 4)
    """
    decoding = DecodingConfig.from_settings(decoding, **{**settings, "search": "sampling"})
    pad_id = model.config.pad_id
    banned = tuple(sorted({pad_id, bos_id} - {eos_id}))
    samples = decoding.num_results
    seed = (decoding.sampling_seed ^ 0x80000000) - 0x80000000  # its 32 bits, as an int32

    def search(encoder_token_ids, *target_prefix):  # positional only: traced per arity
        target_prefix = target_prefix[0] if target_prefix else None
        encoder_token_ids = ops.cast(encoder_token_ids, "int32")
        batch_size, source_length = ops.shape(encoder_token_ids)
        num_steps = source_length + decoding.max_extra_length + 1
        limits = output_limits(encoder_token_ids, pad_id, decoding.max_extra_length)
        limits = ops.repeat(limits, samples, axis=0)  # (rows,), a source's samples together
        keys = _sample_keys(encoder_token_ids, pad_id, samples, seed)
        if target_prefix is not None:
            target_prefix = ops.repeat(ops.cast(target_prefix, "int32"), samples, axis=0)
        cache = start_decoding(
            model,
            model.encode(encoder_token_ids),
            encoder_token_ids,
            num_steps,
            use_cache,
            rows_per_source=samples,
        )
        positions = ops.arange(num_steps + 1, dtype="int32")
        rows = batch_size * samples
        tokens = ops.where(positions[None, :] == 0, bos_id, pad_id)
        tokens = ops.cast(ops.broadcast_to(tokens, (rows, num_steps + 1)), "int32")

        def not_done(state):
            return ops.logical_and(state.step < num_steps, ops.logical_not(ops.all(state.done)))

        def step_fn(state):
            step = state.step
            logits, cache = decode_step(model, state.tokens, step, state.cache, use_cache)
            log_probs = allowed_log_probs(logits, step, limits, eos_id, banned)
            log_probs = forced_prefix(log_probs, step, target_prefix, limits)
            drawn = sampling_log_probs(
                log_probs, decoding.temperature, decoding.top_k, decoding.top_p
            )
            noise = _gumbel_noise(keys, log_probs.shape[-1], step, seed)
            chosen = ops.cast(ops.argmax(drawn + noise, axis=-1), "int32")  # (rows,)
            chosen_log_prob = ops.take_along_axis(log_probs, chosen[:, None], axis=1)[:, 0]
            return next_greedy_state(
                state, chosen, chosen_log_prob, cache, positions, (pad_id, eos_id)
            )

        state = GreedyState(
            step=ops.convert_to_tensor(0, "int32"),
            tokens=tokens,
            done=ops.zeros((rows,), "bool"),
            scores=ops.zeros((rows,), "float32"),
            cache=cache,
        )
        with model.fixed_decoder_weights():  # the loop's weights, prepared once
            state = decoding_loop(not_done, step_fn, state, num_steps, use_cache)
        tokens = padded_after_eos(state.tokens[:, 1:], eos_id, pad_id)
        tokens = ops.reshape(tokens, (batch_size, samples, -1))
        scores = ops.reshape(state.scores, (batch_size, samples))
        scores, order = backend.top_k(scores, samples)  # most probable first
        return ops.take_along_axis(tokens, order[:, :, None], axis=1), scores

    return compile_search(search, model)


# The strategy "sampling" of `DecodingConfig.search`.
build_search = build_sampling_search


def _seed(first, second):
    return ops.stack([ops.convert_to_tensor(first, "int32"), ops.cast(second, "int32")])


def _sample_keys(encoder_token_ids, pad_id, samples, seed):
    """uint32 (batch * samples,): a key per sample, hashed from its source's ids and its index.

    Padding is left out, so a source has the same keys in any batch.
    """
    length = ops.shape(encoder_token_ids)[1]
    places = keyed_hash(ops.cast(ops.arange(length, dtype="int32"), "uint32"), _seed(seed, 1))
    ids = ops.cast(encoder_token_ids, "uint32")
    hashed = keyed_hash(ops.bitwise_xor(ids, places[None, :]), _seed(seed, 2))
    # 20-bit parts, summed exactly in int32 (sources of up to 2048 ids) on every backend.
    parts = ops.cast(ops.right_shift(hashed, 12), "int32")
    parts = ops.where(encoder_token_ids != pad_id, parts, 0)
    source_keys = keyed_hash(ops.cast(ops.sum(parts, axis=1), "uint32"), _seed(seed, 3))
    indices = ops.cast(ops.arange(samples, dtype="int32"), "uint32")
    keys = keyed_hash(ops.bitwise_xor(source_keys[:, None], indices[None, :]), _seed(seed, 4))
    return ops.reshape(keys, (-1,))


def _gumbel_noise(keys, vocab, step, seed):
    """float32 (rows, vocab) Gumbel noise of each row's key at `step`."""
    token_bits = keyed_hash(ops.cast(ops.arange(vocab, dtype="int32"), "uint32"), _seed(seed, step))
    mixed = backend.wrap_uint32(ops.add(keys[:, None], token_bits[None, :]))
    bits = keyed_hash(mixed, _seed(step, seed))
    # 24 bits to a float32 in (0, 1), neither end reached.
    uniform = (ops.cast(ops.right_shift(bits, 8), "float32") + 0.5) * (2.0**-24)
    return -ops.log(-ops.log(uniform))
