import contextlib
import itertools

import keras
import numpy as np
import pytest
from conftest import small_config, to_numpy
from keras import ops

from keras_transformer import Seq2SeqTransformer, TransformerConfig, backend
from keras_transformer.backend import shrinking_batch
from keras_transformer.decoding import (
    build_beam_search,
    build_greedy_search,
    length_penalty,
    search_steps,
)
from keras_transformer.decoding.beam_state import BeamState
from keras_transformer.decoding.beam_stop_rule import beam_search_done
from keras_transformer.decoding.search_steps import NEG_INF, best_next_tokens, cache_stages
from keras_transformer.layers.decoding_cache import DecodingCache

PAD, UNK, BOS, EOS = 0, 1, 2, 3


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(7)
    return Seq2SeqTransformer(small_config(12, num_layers=2))


@pytest.fixture(scope="module")
def sources():
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 12, size=(4, 6)).astype("int32")
    ids[1, 2:] = PAD
    ids[3, 4:] = PAD
    return ids


@pytest.mark.parametrize("max_extra_length", [5, 40])
def test_cached_and_uncached_decoding_give_the_same_tokens(model, sources, max_extra_length):
    for build, kwargs in (
        (build_greedy_search, {}),
        (build_beam_search, {"beam_size": 3, "num_results": 3, "return_num_steps": True}),
    ):
        results = [
            build(
                model,
                bos_id=BOS,
                eos_id=EOS,
                max_extra_length=max_extra_length,
                use_cache=use,
                **kwargs,
            )(sources)
            for use in (True, False)
        ]
        (cached_tokens, cached_scores, *steps), (plain_tokens, plain_scores, *_) = results
        np.testing.assert_array_equal(to_numpy(cached_tokens), to_numpy(plain_tokens))
        np.testing.assert_allclose(to_numpy(cached_scores), to_numpy(plain_scores), atol=1e-4)
        stages = cache_stages(sources.shape[1] + max_extra_length + 1)
        if steps and len(stages) > 1:  # the beams decoded on into the second stage
            assert int(to_numpy(steps[0])) > stages[0]


def test_beam_size_one_equals_greedy(model, sources):
    greedy_tokens, greedy_scores = build_greedy_search(
        model, bos_id=BOS, eos_id=EOS, max_extra_length=5
    )(sources)
    beam_tokens, beam_scores = build_beam_search(
        model, bos_id=BOS, eos_id=EOS, beam_size=1, alpha=0.0, max_extra_length=5
    )(sources)
    np.testing.assert_array_equal(to_numpy(beam_tokens)[:, 0], to_numpy(greedy_tokens))
    np.testing.assert_allclose(to_numpy(beam_scores)[:, 0], to_numpy(greedy_scores), atol=1e-5)


def exhaustive_best(model, source, max_extra_length, alpha):
    """Scores every output sequence with the uncached model; returns the best one.

    The sequences of one length go through the model as one batch: one call per length.
    """
    limit = int((source != PAD).sum()) + max_extra_length
    allowed = [t for t in range(model.config.vocabulary_size) if t not in (PAD, BOS, EOS)]
    encoder_outputs = model.encode(source[None])
    mask = source[None] != PAD
    best = (-np.inf, None)
    for length in range(limit + 1):
        candidates = list(itertools.product(allowed, repeat=length))
        count = len(candidates)
        bodies = np.array(candidates, "int32").reshape(count, length)  # also for length 0
        decoder_input = np.concatenate([np.full((count, 1), BOS, "int32"), bodies], axis=1)
        logits = to_numpy(
            model.decode_sequence(
                decoder_input,
                ops.repeat(encoder_outputs, count, axis=0),
                np.repeat(mask, count, axis=0),
            )
        ).astype("float64")  # (candidates, length + 1, vocabulary)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        totals = np.take_along_axis(log_probs[:, :length], bodies[..., None], axis=-1).sum((1, 2))
        # EOS is forced (probability 1) once the limit is reached.
        if length < limit:
            totals += log_probs[:, length, EOS]
        scores = totals / ((5 + length + 1) / 6) ** alpha
        if scores.max() > best[0]:
            best = (float(scores.max()), list(bodies[int(scores.argmax())]))
    return best


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_large_beam_finds_the_exhaustive_optimum(alpha):
    keras.utils.set_random_seed(3)
    config = small_config(7, d_model=8, intermediate_dim=16)
    tiny = Seq2SeqTransformer(config)
    sources = np.array([[5, 3], [4, 0]], "int32")  # source lengths 2 and 1
    max_extra = 1
    tokens, scores = build_beam_search(
        tiny, bos_id=BOS, eos_id=EOS, beam_size=64, alpha=alpha, max_extra_length=max_extra
    )(sources)
    for row, source in enumerate(sources):
        best_score, best_tokens = exhaustive_best(tiny, source, max_extra, alpha)
        # The whole row: a PAD emitted inside the output must not be filtered away.
        row_tokens = to_numpy(tokens)[row, 0]
        padding = [PAD] * (len(row_tokens) - len(best_tokens))
        np.testing.assert_array_equal(row_tokens, best_tokens + padding)
        assert float(to_numpy(scores)[row, 0]) == pytest.approx(best_score, abs=1e-4)


class ScriptedModel:
    """A stand-in decoder whose next-token distribution is written by hand.

    After BOS: EOS with probability `p_stop`, token 4 otherwise. After any
    other token: token 5 with probability `p_continue` until `length` tokens
    exist, then EOS with probability `p_continue`.
    """

    vocabulary_size = 8

    def __init__(self, p_stop=0.55, p_continue=0.999, length=10):
        self.config = TransformerConfig(vocabulary_size=self.vocabulary_size)
        self.variables = []
        self.built = True
        self.p_stop, self.p_continue, self.length = p_stop, p_continue, length

    def encode(self, token_ids):
        return ops.zeros((ops.shape(token_ids)[0], ops.shape(token_ids)[1], 1))

    def initialize_cache(self, encoder_outputs, encoder_token_ids, max_length, rows_per_source=1):
        # Nothing grows: the next token depends on the last one and the step only.
        return DecodingCache(growing=(), fixed={"encoder_padding_mask": encoder_token_ids != PAD})

    def fixed_decoder_weights(self):
        return contextlib.nullcontext()  # no weights

    def decode(self, token_ids, cache, index):
        vocab = np.arange(self.vocabulary_size)

        def distribution(top, p_top):
            others = (1.0 - p_top) / (self.vocabulary_size - 1)
            return np.log(np.where(vocab == top, p_top, others)).astype("float32")

        after_bos = np.log(
            np.where(vocab == EOS, self.p_stop, np.where(vocab == 4, 1 - self.p_stop, 1e-9))
        ).astype("float32")
        keep_going = distribution(5, self.p_continue)
        stop_now = distribution(EOS, self.p_continue)
        last = token_ids[:, 0]
        late = ops.greater_equal(index, self.length - 1)
        logits = ops.where(
            (last == BOS)[:, None],
            after_bos[None],
            ops.where(late, stop_now[None], keep_going[None]),
        )
        return logits[:, None, :], cache


def test_the_stop_rule_compares_the_settling_slot_with_the_best_live_bound():
    # Source rows 1 and 0 of a batch of 2 (the row order `sources` gives), beam 3. A source is
    # done when its finished score in the settling slot reaches the best live log-probability
    # divided by the penalty at its length limit: the best any live beam can still score.
    finished = np.array([[-1.0, -2.0, -9.0], [-0.5, -2.5, -4.5]], "float32")
    live = np.array([[-3.0, -5.0, -6.0], [-6.0, -7.0, -8.0]], "float32")
    max_penalty = np.array([2.0, 3.0], "float32")  # source 0, source 1
    state = BeamState(
        step=0, live_seqs=None, live_scores=ops.convert_to_tensor(live), finished_seqs=None,
        finished_scores=ops.convert_to_tensor(finished), sources=ops.convert_to_tensor([1, 0]),
        result_seqs=None, result_scores=None, cache=None,
    )  # fmt: skip
    for slot in range(3):
        bound = live[:, 0] / max_penalty[[1, 0]]  # [-1.0, -3.0]
        done = to_numpy(beam_search_done(state, ops.convert_to_tensor(max_penalty), slot))
        np.testing.assert_array_equal(done, finished[:, slot] >= bound)
    assert to_numpy(beam_search_done(state, max_penalty, 0)).tolist() == [True, True]
    assert to_numpy(beam_search_done(state, max_penalty, 2)).tolist() == [False, False]
    assert to_numpy(beam_search_done(state, max_penalty, 1)).tolist() == [False, True]


def test_length_penalty_changes_the_choice():
    sources = np.full((1, 3), 6, "int32")
    scripted = ScriptedModel()
    short = build_beam_search(scripted, bos_id=BOS, eos_id=EOS, beam_size=4, alpha=0.0)
    long = build_beam_search(scripted, bos_id=BOS, eos_id=EOS, beam_size=4, alpha=0.6)
    short_tokens = to_numpy(short(sources)[0])[0, 0]
    long_tokens = to_numpy(long(sources)[0])[0, 0]
    # Raw log-probability prefers stopping at once (0.55 against 0.45 * 0.999^9);
    # the length penalty of 0.6 prefers the 9-token hypothesis (10 with its EOS).
    width = 3 + 50 + 1  # source length + max_extra_length + the EOS slot
    np.testing.assert_array_equal(short_tokens, [PAD] * width)
    np.testing.assert_array_equal(long_tokens, [4] + [5] * 8 + [PAD] * (width - 9))
    assert float(to_numpy(length_penalty(11, 0.6))) == pytest.approx((16 / 6) ** 0.6, rel=1e-6)


def best_result(search, sources):
    """Tokens (batch, width) and scores (batch,) of the best hypothesis, greedy or beam."""
    tokens, scores = (to_numpy(t) for t in search(sources))
    return (tokens[:, 0], scores[:, 0]) if tokens.ndim == 3 else (tokens, scores)


SEARCHES = {
    "greedy": lambda model: build_greedy_search(model, bos_id=BOS, eos_id=EOS),
    "beam1": lambda model: build_beam_search(model, bos_id=BOS, eos_id=EOS, beam_size=1),
    "beam4": lambda model: build_beam_search(model, bos_id=BOS, eos_id=EOS, beam_size=4),
}


def penalty(search_name, num_tokens):
    """The paper's lp(Y) = ((5 + |Y|) / 6) ** 0.6 (beam's default alpha), |Y| counting EOS."""
    return 1.0 if search_name == "greedy" else ((5 + num_tokens) / 6) ** 0.6


@pytest.mark.parametrize("search_name", list(SEARCHES))
def test_output_never_exceeds_source_length_plus_50(search_name):
    # This decoder never wants to stop: only the limit ends it.
    scripted = ScriptedModel(p_stop=1e-6, p_continue=0.999, length=10**6)
    sources = np.zeros((3, 7), "int32")
    for row, length in enumerate((7, 3, 1)):
        sources[row, :length] = 6
    tokens, scores = best_result(SEARCHES[search_name](scripted), sources)
    width = 7 + 50 + 1
    for row, limit in enumerate((57, 53, 51)):
        # Token 4, then 5 until the limit of source length + 50 tokens, then the
        # forced EOS (probability 1, so log-probability 0), shown as padding.
        expected = [4] + [5] * (limit - 1) + [PAD] * (width - limit)
        np.testing.assert_array_equal(tokens[row], expected)
        log_prob = np.log(1 - 1e-6) + (limit - 1) * np.log(0.999)
        expected_score = log_prob / penalty(search_name, limit + 1)
        # float32 log-softmax errs by up to ~1.2e-7 a step (JAX's; TensorFlow's is exact here).
        assert float(scores[row]) == pytest.approx(expected_score, abs=2e-7 * limit)


class PadLovingModel(ScriptedModel):
    """A scripted decoder that puts most of its probability on PAD (0.45) and BOS (0.34).

    Of the tokens a search may emit, token 6 is the most probable (0.2) while
    fewer than `length` tokens exist, then EOS (0.2); the rest get 0.002 each.
    """

    def decode(self, token_ids, cache, index):
        vocab = np.arange(self.vocabulary_size)

        def distribution(top):
            p = np.where(vocab == top, 0.2, 0.002)
            p = np.where(vocab == PAD, 0.45, np.where(vocab == BOS, 0.34, p))
            return np.log(p).astype("float32")

        late = ops.greater_equal(index, self.length)
        logits = ops.where(late, distribution(EOS), distribution(6))
        logits = ops.broadcast_to(logits[None, None, :], (ops.shape(token_ids)[0], 1, len(vocab)))
        return logits, cache


@pytest.mark.parametrize("search_name", list(SEARCHES))
def test_padding_and_bos_are_never_emitted_even_when_most_probable(search_name):
    sources = np.array([[7, 7, 0], [7, 7, 7]], "int32")
    tokens, scores = best_result(SEARCHES[search_name](PadLovingModel(length=2)), sources)
    # Whole rows: an emitted PAD would otherwise look like the end of the output.
    np.testing.assert_array_equal(tokens, [[6, 6] + [PAD] * 52] * 2)
    expected_score = 3 * np.log(0.2) / penalty(search_name, 3)  # 6, 6, EOS
    np.testing.assert_allclose(scores, [expected_score] * 2, rtol=1e-5)


@pytest.mark.parametrize("vocab, count", [(50, 8), (9, 8), (30, 1)])
def test_best_next_tokens_are_the_best_of_the_full_log_softmax(vocab, count):
    rng = np.random.default_rng(vocab)
    logits = rng.normal(size=(6, vocab)).astype("float32")
    logits[:, 10 % vocab] = logits[:, 4]  # tied logits: the lower id ranks first
    logits[0, [PAD, BOS]] = 9.0  # banned, though the most probable
    limits = np.array([5, 5, 3, 9, 4, 5], "int32")  # rows 2 and 4 are at their limit
    step = 4
    log_probs, token_ids = best_next_tokens(logits, step, limits, EOS, (PAD, BOS), count)
    log_probs, token_ids = to_numpy(log_probs), to_numpy(token_ids)
    # Reference: the whole row's log-softmax with the rules applied, sorted.
    full = logits - logits.max(axis=-1, keepdims=True)
    full = full - np.log(np.exp(full).sum(axis=-1, keepdims=True))
    full[:, [PAD, BOS]] = NEG_INF
    at_limit = step >= limits
    full[at_limit] = NEG_INF
    full[at_limit, EOS] = 0.0
    expected_ids = np.argsort(-full, axis=-1, kind="stable")[:, :count]
    expected = np.take_along_axis(full, expected_ids, -1)
    np.testing.assert_allclose(log_probs, expected, rtol=1e-6, atol=1e-6)
    # Each id is distinct and carries its own log-probability.
    np.testing.assert_allclose(np.take_along_axis(full, token_ids, -1), log_probs, rtol=1e-6)
    assert all(len(set(row)) == count for row in token_ids.tolist())
    np.testing.assert_array_equal(token_ids[at_limit, 0], EOS)
    if keras.backend.backend() != "torch":  # torch.topk orders ties as it likes
        # Ties to the lower id, as a stable sort of the whole row ranks them.
        np.testing.assert_array_equal(token_ids, expected_ids)


@pytest.mark.skipif(
    keras.backend.backend() == "torch" or backend.on_accelerator(),
    reason="the blocked top-k is a form of TensorFlow and JAX on a CPU",
)
def test_searches_with_the_blocked_top_k_return_what_they_return_without(sources):
    keras.utils.set_random_seed(3)
    wide = Seq2SeqTransformer(small_config(4000))  # wide enough for the blocked form
    assert backend.kernels._top_k_block(4000, 2 * 4 + 2) is not None
    assert backend.kernels._top_k_block(4000, 1 + 2) is not None
    for build, kwargs in ((build_beam_search, {"num_results": 2}), (build_greedy_search, {})):
        results = []
        for disabled in ((), ("blocked_top_k",)):
            with backend.fast_forms_disabled(disabled):  # read when the search is traced
                search = build(wide, bos_id=BOS, eos_id=EOS, max_extra_length=8, **kwargs)
                results.append([to_numpy(t) for t in search(sources)])
        (tokens, scores), (stock_tokens, stock_scores) = results
        np.testing.assert_array_equal(tokens, stock_tokens)
        np.testing.assert_array_equal(scores, stock_scores)


@pytest.mark.skipif(
    keras.backend.backend() != "jax" or backend.on_accelerator(),
    reason="paired steps are a form of JAX's fixed-shape loop on a CPU",
)
@pytest.mark.parametrize("first_stage", [16, 5])
def test_paired_beam_steps_return_what_single_steps_return(
    model, sources, monkeypatch, first_stage
):
    """Two steps per loop iteration: the same results and step count, at either parity.

    A stage of odd length (here 5, then 10 from step 5) is not paired: its second
    step could run past the stage's buffer while the search goes on.
    """
    monkeypatch.setattr(backend.decoding, "PAIRED_STEPS_MIN_BYTES", 0)  # pair over any cache
    monkeypatch.setattr(search_steps, "FIRST_CACHE_STAGE", first_stage)
    paired_stages = []
    decide = backend.paired_beam_steps

    def watched(cache):
        paired_stages.append(decide(cache))
        return paired_stages[-1]

    monkeypatch.setattr(backend, "paired_beam_steps", watched)
    steps_run = set()
    # 0 extra tokens: the search runs to its limit of 7 steps, so the paired loop's
    # second step is past the end; 1 and 2 end on either parity; 30 cross cache stages.
    for max_extra_length in (0, 1, 2, 30):
        results = []
        for disabled in ((), ("paired_beam_steps",)):
            with backend.fast_forms_disabled(disabled):  # read when the search is traced
                search = build_beam_search(
                    model,
                    bos_id=BOS,
                    eos_id=EOS,
                    beam_size=3,
                    num_results=2,
                    max_extra_length=max_extra_length,
                    return_num_steps=True,
                )
                results.append([to_numpy(t) for t in search(sources)])
        (tokens, scores, steps), (single_tokens, single_scores, single_steps) = results
        np.testing.assert_array_equal(tokens, single_tokens)
        np.testing.assert_allclose(scores, single_scores, rtol=1e-6)
        assert int(steps) == int(single_steps)
        steps_run.add(int(steps))
    assert 7 in steps_run and {s % 2 for s in steps_run} == {0, 1}, steps_run
    assert max(steps_run) > cache_stages(sources.shape[1] + 31)[0]  # past the first stage
    assert True in paired_stages and False in paired_stages  # traced with and without


def test_empty_source_yields_empty_output(model, sources):
    batch = np.concatenate([sources[:1], np.zeros((1, 6), "int32")])
    for search in (
        build_greedy_search(model, bos_id=BOS, eos_id=EOS),
        build_beam_search(model, bos_id=BOS, eos_id=EOS, num_results=2),
    ):
        tokens, scores = search(batch)
        tokens, scores = to_numpy(tokens), to_numpy(scores)
        assert np.all(tokens[1] == PAD)
        assert np.ravel(scores[1])[0] == 0.0


def test_fewer_hypotheses_than_asked_are_marked():
    sources = np.zeros((1, 2), "int32")  # empty: the only hypothesis is the empty one
    scripted = ScriptedModel()
    tokens, scores = build_beam_search(
        scripted, bos_id=BOS, eos_id=EOS, beam_size=3, num_results=3
    )(sources)
    assert to_numpy(scores)[0, 0] == 0.0
    assert np.all(np.isneginf(to_numpy(scores)[0, 1:]))
    assert np.all(to_numpy(tokens) == PAD)


def test_bad_search_arguments(model):
    with pytest.raises(ValueError, match="num_results"):
        build_beam_search(model, bos_id=BOS, eos_id=EOS, beam_size=2, num_results=3)
    with pytest.raises(ValueError, match="alpha"):
        build_beam_search(model, bos_id=BOS, eos_id=EOS, alpha=-1.0)
    with pytest.raises(ValueError, match="stop_rule"):
        build_beam_search(model, bos_id=BOS, eos_id=EOS, stop_rule="never")


# Torch draws other initial weights from the same seed; its seeds are picked so that rows of
# both num_results settle at different steps, as the TF/JAX ones do.
SEED_OFFSET = {"torch": 6}.get(keras.backend.backend(), 0)


@pytest.mark.parametrize("num_results", [1, 2])
def test_settling_on_the_last_result_keeps_the_results_and_saves_steps(num_results):
    # The former rule waits for the beam_size-th finished hypothesis; stopping on
    # the num_results-th is exact (nothing live can still outrank it), so the
    # returned hypotheses must be identical, bit for bit, after fewer loop steps.
    # A random model over 3 emittable tokens (UNK, EOS, 4; vocabulary 5 with PAD
    # and BOS banned) ends hypotheses often, so rows settle at different steps.
    keras.utils.set_random_seed(num_results + SEED_OFFSET)
    config = small_config(5, d_model=8, intermediate_dim=16, dropout=0.1)
    tiny = Seq2SeqTransformer(config)
    rng = np.random.default_rng(num_results)
    sources = rng.integers(1, 5, size=(8, 5)).astype("int32")
    sources[rng.random(sources.shape) < 0.3] = PAD
    outputs, steps = {}, {}
    for rule in ("results", "beam"):
        search = build_beam_search(
            tiny,
            bos_id=BOS,
            eos_id=EOS,
            beam_size=4,
            num_results=num_results,
            max_extra_length=10,
            stop_rule=rule,
            return_num_steps=True,
        )
        # One row at a time: the loop runs until its slowest row settles.
        results = [[to_numpy(t) for t in search(source[None])] for source in sources]
        tokens, scores, num_steps = zip(*results, strict=True)
        outputs[rule] = (np.concatenate(tokens), np.concatenate(scores))
        steps[rule] = [int(n) for n in num_steps]
    np.testing.assert_array_equal(outputs["results"][0], outputs["beam"][0])
    np.testing.assert_array_equal(outputs["results"][1], outputs["beam"][1])
    assert all(map(np.less_equal, steps["results"], steps["beam"])), steps
    assert sum(steps["results"]) < sum(steps["beam"]), steps


@contextlib.contextmanager
def eager_functions():
    """TensorFlow runs `tf.function`s eagerly inside (the other backends' searches are eager
    or compiled regardless), so Python sees every loop step."""
    if keras.backend.backend() != "tensorflow":
        yield
        return
    import tensorflow as tf

    tf.config.run_functions_eagerly(True)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(False)


@pytest.mark.parametrize("num_results", [1, 2])
def test_settled_sources_leave_the_loop_and_the_results_stay(num_results, monkeypatch):
    # A settled source's returned hypotheses can no longer change, so dropping it from the
    # loop must return what keeping every row to the end returns, while later steps decode
    # fewer rows. The same tokens; scores up to float rounding, since a matmul over fewer rows
    # may round differently. Random model over 3 emittable tokens and sources of different
    # lengths: rows settle at different steps (as in the test above).
    keras.utils.set_random_seed(num_results + SEED_OFFSET)
    tiny = Seq2SeqTransformer(small_config(5, d_model=8, intermediate_dim=16, dropout=0.1))
    rng = np.random.default_rng(num_results)
    sources = rng.integers(1, 5, size=(8, 5)).astype("int32")
    sources[rng.random(sources.shape) < 0.3] = PAD
    kwargs = dict(bos_id=BOS, eos_id=EOS, beam_size=4, num_results=num_results)
    kwargs["max_extra_length"] = 10
    if not shrinking_batch():  # JAX's loops keep their shapes: every row stays
        with pytest.raises(ValueError, match="drop_settled"):
            build_beam_search(tiny, drop_settled=True, **kwargs)
        return
    kept = [to_numpy(t) for t in build_beam_search(tiny, drop_settled=False, **kwargs)(sources)]
    dropped = [to_numpy(t) for t in build_beam_search(tiny, **kwargs)(sources)]  # the default
    rows = []
    decode = tiny.decode

    def counting_decode(tokens, *args, **kwargs):
        rows.append(int(ops.shape(tokens)[0]))
        return decode(tokens, *args, **kwargs)

    monkeypatch.setattr(tiny, "decode", counting_decode)
    with eager_functions():
        eager = [to_numpy(t) for t in build_beam_search(tiny, **kwargs)(sources)]
    for outputs in (dropped, eager):
        np.testing.assert_array_equal(outputs[0], kept[0])
        np.testing.assert_allclose(outputs[1], kept[1], rtol=1e-6)
    assert rows[0] == 8 * 4, rows
    assert rows == sorted(rows, reverse=True) and rows[-1] < rows[0], rows
    with pytest.raises(ValueError, match="drop_settled"):
        build_beam_search(tiny, use_cache=False, drop_settled=True, **kwargs)
