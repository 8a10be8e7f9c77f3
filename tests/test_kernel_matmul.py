"""kernel_matmul and add_bias: values and gradients against closed forms; JAX's graph form."""

import keras
import numpy as np
import pytest
from conftest import CPU_FORMS, to_numpy

from keras_transformer.layers.kernel_matmul import add_bias, kernel_matmul


def gradients(x, w, upstream, transpose_kernel=False):
    """The gradients of `sum(kernel_matmul(x, w) * upstream)` in x and w (backend autodiff)."""
    if keras.backend.backend() == "jax":
        import jax

        def loss(x, w):
            return (kernel_matmul(x, w, transpose_kernel) * upstream).sum()

        # jit: the form the trainer runs (the custom gradient is traced, then compiled).
        return [np.asarray(g) for g in jax.jit(jax.grad(loss, argnums=(0, 1)))(x, w)]
    if keras.backend.backend() == "torch":
        import torch

        x, w = (torch.as_tensor(a).detach().requires_grad_() for a in (x, w))
        loss = (kernel_matmul(x, w, transpose_kernel) * torch.as_tensor(upstream)).sum()
        return list(torch.autograd.grad(loss, [x, w]))  # torch tensors: bfloat16 kept
    import tensorflow as tf

    x, w = tf.constant(x), tf.constant(w)
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        loss = tf.reduce_sum(kernel_matmul(x, w, transpose_kernel) * upstream)
    return [g.numpy() for g in tape.gradient(loss, [x, w])]


@pytest.mark.parametrize("transpose_kernel", [False, True], ids=["kernel", "kernel^T"])
@pytest.mark.parametrize(
    "leading, d_in, d_out",
    [((6,), 16, 24), ((3, 5), 16, 24), ((2, 3, 4), 16, 24), ((3, 5), 24, 16), ((3, 5), 16, 16)],
    ids=["widening-2d", "widening-3d", "widening-4d", "narrowing", "square"],
)
def test_value_and_gradients_match_the_closed_form(leading, d_in, d_out, transpose_kernel):
    rng = np.random.default_rng(len(leading) + d_in)
    x = rng.normal(size=(*leading, d_in)).astype("float32")
    w = rng.normal(size=(d_in, d_out)).astype("float32")  # the (d_in, d_out) matrix applied
    if transpose_kernel:
        w = np.ascontiguousarray(w.T)  # stored as (d_out, d_in), as a tied embedding
    upstream = rng.normal(size=(*leading, d_out)).astype("float32")
    x64, g64 = x.astype(np.float64), upstream.astype(np.float64)
    applied = w.T.astype(np.float64) if transpose_kernel else w.astype(np.float64)

    np.testing.assert_allclose(
        to_numpy(kernel_matmul(x, w, transpose_kernel)), x64 @ applied, rtol=1e-5, atol=1e-5
    )
    dx, dw = gradients(x, w, upstream, transpose_kernel)
    assert dx.shape == x.shape and dw.shape == w.shape
    np.testing.assert_allclose(dx, g64 @ applied.T, rtol=1e-5, atol=1e-4, err_msg="x")
    # dW = sum over every leading position of x^T dy (transposed back for a transposed kernel).
    rows, upstream_rows = x64.reshape(-1, d_in), g64.reshape(-1, d_out)
    expected = rows.T @ upstream_rows
    np.testing.assert_allclose(
        dw, expected.T if transpose_kernel else expected, rtol=1e-5, atol=1e-4, err_msg="w"
    )


@pytest.mark.parametrize("transpose_kernel", [False, True], ids=["kernel", "kernel^T"])
def test_half_precision_keeps_the_dtype_of_value_and_gradients(transpose_kernel):
    rng = np.random.default_rng(7)
    x = keras.ops.cast(rng.normal(size=(2, 4, 8)), "bfloat16")
    w = keras.ops.cast(rng.normal(size=(16, 8) if transpose_kernel else (8, 16)), "bfloat16")
    upstream = keras.ops.cast(rng.normal(size=(2, 4, 16)), "bfloat16")
    outputs = kernel_matmul(x, w, transpose_kernel)
    assert keras.backend.standardize_dtype(outputs.dtype) == "bfloat16"
    x32, w32 = (to_numpy(keras.ops.cast(t, "float32")) for t in (x, w))
    np.testing.assert_allclose(
        to_numpy(keras.ops.cast(outputs, "float32")),
        x32 @ (w32.T if transpose_kernel else w32),
        rtol=2e-2,
        atol=5e-2,
    )
    for gradient, like in zip(gradients(x, w, upstream, transpose_kernel), (x, w), strict=True):
        assert keras.backend.standardize_dtype(gradient.dtype) == "bfloat16"
        assert gradient.shape == like.shape


def test_a_kernel_that_is_not_a_matrix_is_refused():
    with pytest.raises(ValueError, match=r"`kernel` must be a matrix .*shape=\(2, 3, 4\)"):
        kernel_matmul(np.ones((5, 2), "float32"), np.ones((2, 3, 4), "float32"))
    with pytest.raises(ValueError, match=r"matrix \(d_out, d_in\)\. Received: shape=\(3,\)"):
        kernel_matmul(np.ones((5, 2), "float32"), np.ones((3,), "float32"), transpose_kernel=True)


@CPU_FORMS
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the JAX backend's CPU form")
@pytest.mark.parametrize("transpose_kernel", [False, True], ids=["kernel", "kernel^T"])
@pytest.mark.parametrize("d_in, d_out", [(16, 24), (24, 16)], ids=["widening", "narrowing"])
def test_on_jax_cpu_a_kernel_gradient_contracts_the_last_axis_of_a_fenced_transpose(
    d_in, d_out, transpose_kernel
):
    import jax

    def ours(x, w):
        return kernel_matmul(x, w, transpose_kernel)

    def plain(x, w):
        return keras.ops.matmul(x, keras.ops.transpose(w) if transpose_kernel else w)

    def traced_gradient(product, d_in, d_out):
        x = np.ones((3, 5, d_in), "float32")
        w = np.ones((d_out, d_in) if transpose_kernel else (d_in, d_out), "float32")
        return jax.make_jaxpr(jax.grad(lambda x, w: product(x, w).sum(), argnums=1))(x, w)

    jaxpr = traced_gradient(ours, d_in, d_out)
    widening = d_in < d_out
    # The narrower operand's transpose is fenced: x^T (16, tokens) for a widening kernel,
    # dy^T (16, tokens) for a narrowing one. The dot gives (16, 24): dW = x^T dy, or
    # dW^T = dy^T x. When that is not the kernel's layout, its transpose is fenced too.
    fences = 1 if widening != transpose_kernel else 2
    assert str(jaxpr).count("optimization_barrier") == fences, jaxpr
    dots = [
        e
        for e in jaxpr.jaxpr.eqns
        if e.primitive.name == "dot_general" and e.outvars[0].aval.shape == (16, 24)
    ]
    assert len(dots) == 1, jaxpr
    # (16, tokens) x (tokens, 24): the left operand contracts its last axis.
    (lhs_contracting, rhs_contracting), _ = dots[0].params["dimension_numbers"]
    assert tuple(lhs_contracting) == (1,) and tuple(rhs_contracting) == (0,)
    assert dots[0].invars[0].aval.shape == (16, 15)

    # Square kernels: exactly the program of a plain matmul.
    assert str(traced_gradient(ours, 16, 16)) == str(traced_gradient(plain, 16, 16))


@CPU_FORMS
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the JAX backend's CPU form")
@pytest.mark.parametrize("tie_output_projection", [True, False], ids=["tied", "untied"])
def test_on_jax_cpu_the_models_non_square_products_take_the_fenced_form(
    tiny_config, tie_output_projection
):
    """Each feed-forward layer's two kernels and the pre-softmax projection use the form."""
    import jax

    from keras_transformer import Seq2SeqTransformer

    # 2 + 2 layers; d_model 16 widens to d_ff 32 and back, and to 31 vocabulary rows.
    config = tiny_config.replace(tie_output_projection=tie_output_projection)
    model = Seq2SeqTransformer(config)
    ids = np.arange(1, 13, dtype="int32").reshape(2, 6)
    inputs = {"encoder_token_ids": ids, "decoder_token_ids": ids}
    model(inputs)
    non_trainable = [v.value for v in model.non_trainable_variables]

    def loss(trainable):
        logits, _ = model.stateless_call(trainable, non_trainable, inputs)
        return logits.sum()

    jaxpr = jax.make_jaxpr(jax.grad(loss))([v.value for v in model.trainable_variables])
    # Per feed-forward layer (4): a fenced x^T for the widening first kernel, a fenced dy^T
    # and the dot's fenced result for the narrowing second one. The tied projection's
    # transposed kernel fences its dot's result too.
    expected = 3 * 2 * config.num_layers + (2 if tie_output_projection else 1)
    assert str(jaxpr).count("optimization_barrier") == expected


@pytest.mark.parametrize("leading", [(6,), (3, 5), (2, 3, 4)], ids=["2d", "3d", "4d"])
def test_add_bias_is_a_broadcast_sum_and_its_gradient_sums_the_rows(leading):
    rng = np.random.default_rng(len(leading))
    outputs = rng.normal(size=(*leading, 7)).astype("float32")
    bias = rng.normal(size=(7,)).astype("float32")
    upstream = rng.normal(size=(*leading, 7)).astype("float32")
    np.testing.assert_allclose(to_numpy(add_bias(outputs, bias)), outputs + bias, rtol=1e-6)
    if keras.backend.backend() == "jax":
        import jax

        gradient = np.asarray(jax.grad(lambda b: (add_bias(outputs, b) * upstream).sum())(bias))
    else:
        import tensorflow as tf

        variable = tf.constant(bias)
        with tf.GradientTape() as tape:
            tape.watch(variable)
            total = tf.reduce_sum(add_bias(outputs, variable) * upstream)
        gradient = tape.gradient(total, variable).numpy()
    expected = upstream.astype(np.float64).reshape(-1, 7).sum(axis=0)
    np.testing.assert_allclose(gradient, expected, rtol=1e-5, atol=1e-5)
