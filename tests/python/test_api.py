# The Python module's own contract: shapes and dtypes of what it returns, hand-worked values,
# layouts (strided and transposed arrays quantize like their C-order copies), errors.
import numpy as np
import pytest

import nvfp4


def test_module_says_what_it_is():
    assert nvfp4.__version__.count(".") == 2
    assert nvfp4.compiled_isa in ("avx512", "avx2", "scalar")
    assert nvfp4.formats == ("nvfp4_1x16", "nvfp4_16x16", "mxfp4", "mxfp8")


def test_hand_worked_nvfp4_block():
    # Integers -6..6: amax 6, S_enc = 2688/6 = 448, a block whose max is 6 gets the UE4M3 scale
    # 448 (0x7E) and keeps its values, except 5, halfway between 4 and 6: to 4 (even mantissa).
    x = (np.arange(32, dtype=np.float32) % 13 - 6).reshape(1, 32)
    q = nvfp4.quantize(x, "nvfp4_1x16")
    assert q.amax == 6.0 and q.encode_scale == 448.0
    assert q.data.shape == (1, 16) and q.data.dtype == np.uint8
    assert q.scales.shape == (1, 2) and q.scales[0, 0] == 0x7E
    # elements 0, 1 are -6 (code 0xF: sign + 111) and -5 -> -4 (0xE)
    assert q.data[0, 0] == 0xEF
    y = nvfp4.dequantize(q)
    assert y.dtype == np.float32 and y.shape == (1, 32)
    # x̂ = (element * block scale) * S_dec in float32, S_dec = fp32(1 / 448) (not exact: 6 -> 6.0000005)
    elements = np.where(np.abs(x) == 5, np.sign(x) * 4, x).astype(np.float32)
    assert np.array_equal(y, (elements * np.float32(448)) * (np.float32(1) / np.float32(448)))
    assert y[0, 0] != -6.0


@pytest.mark.parametrize("fmt,data_cols,scale_cols", [("nvfp4_1x16", 40, 5), ("nvfp4_16x16", 40, 5), ("mxfp4", 40, 3),
                                                       ("mxfp8", 80, 3)])
def test_shapes_of_every_format(fmt, data_cols, scale_cols):
    x = np.random.default_rng(1).standard_normal((33, 80)).astype(np.float32)
    q = nvfp4.quantize(x, fmt)
    assert q.format == fmt and q.shape == (33, 80) and q.axis == "rowwise"
    assert q.data.shape == (33, data_cols) and q.scales.shape == (33, scale_cols)
    assert nvfp4.dequantize(q).shape == (33, 80)
    assert not q.data.flags.writeable and not q.scales.flags.writeable


def test_strided_and_transposed_inputs_quantize_like_their_copies():
    x = np.random.default_rng(2).standard_normal((64, 96)).astype(np.float32)
    for view in (x.T, x[::2, :], x[:, 16:80], np.asfortranarray(x), x[::-1, :]):
        a, b = nvfp4.quantize(view), nvfp4.quantize(np.ascontiguousarray(view))
        assert a.data.tobytes() == b.data.tobytes() and a.scales.tobytes() == b.scales.tobytes()


def test_bf16_input_is_uint16_bits():
    x = np.random.default_rng(3).standard_normal((16, 64)).astype(np.float32)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncated to bf16
    widened = (bits.astype(np.uint32) << 16).view(np.float32)
    a, b = nvfp4.quantize(bits), nvfp4.quantize(widened)
    assert a.data.tobytes() == b.data.tobytes() and a.amax == b.amax


def test_stochastic_rounding_depends_on_the_seed_only():
    x = np.random.default_rng(4).standard_normal((32, 64)).astype(np.float32)
    a = nvfp4.quantize(x, rounding="stochastic", seed=1)
    assert a.data.tobytes() == nvfp4.quantize(x, rounding="stochastic", seed=1).data.tobytes()
    assert a.data.tobytes() != nvfp4.quantize(x, rounding="stochastic", seed=2).data.tobytes()


def test_from_bytes_round_trips():
    x = np.random.default_rng(5).standard_normal((16, 64)).astype(np.float32)
    q = nvfp4.quantize(x, "nvfp4_1x16")
    back = nvfp4.QuantizedTensor.from_bytes("nvfp4_1x16", 16, 64, q.data, q.scales, amax=q.amax)
    assert np.array_equal(nvfp4.dequantize(back), nvfp4.dequantize(q))


def test_rht_is_orthogonal_and_inverse_undoes_it():
    x = np.random.default_rng(6).standard_normal((8, 64)).astype(np.float32)
    y = nvfp4.hadamard_rows(x)
    back = nvfp4.hadamard_rows(y, inverse=True)
    assert np.allclose(back, x, rtol=2e-2, atol=2e-2)  # two bf16 roundings
    t = nvfp4.HadamardTransform.with_signs([1] * 16)
    assert t.size == 16 and t.signs == [1] * 16


def test_gemm_shapes_and_modes():
    rng = np.random.default_rng(7)
    a = nvfp4.quantize(rng.standard_normal((16, 128)).astype(np.float32))
    b = nvfp4.quantize(rng.standard_normal((24, 128)).astype(np.float32), "nvfp4_16x16")
    exact, relaxed = nvfp4.gemm(a, b), nvfp4.gemm(a, b, mode="relaxed")
    assert exact.shape == relaxed.shape == (16, 24) and exact.dtype == np.float32
    reference = nvfp4.dequantize(a) @ nvfp4.dequantize(b).T
    assert nvfp4.sqnr_db(reference, exact) > 100
    c = np.ones((16, 24), np.float32)
    assert np.array_equal(nvfp4.gemm(a, b, c=c, beta=2.0), np.float32(2) * c + exact)  # fma(2, 1, d) is exact here
    unscaled = nvfp4.block_scaled_mma(a, b)
    assert np.allclose(unscaled * nvfp4.gemm_alpha(a, b), exact, rtol=1e-6)


@pytest.mark.parametrize("call,kind,code", [
    (lambda: nvfp4.quantize(np.zeros((4, 32), np.float64)), TypeError, None),
    (lambda: nvfp4.quantize(np.zeros(32, np.float32)), ValueError, None),
    (lambda: nvfp4.quantize(np.zeros((4, 32), np.float32), "nvfp5"), nvfp4.Error, "invalid_argument"),
    (lambda: nvfp4.quantize(np.zeros((4, 32), np.float32), rounding="up"), nvfp4.Error, "invalid_argument"),
    (lambda: nvfp4.quantize(np.array([[1.0, np.inf]], np.float32)), nvfp4.Error, "non_finite_input"),
    (lambda: nvfp4.gemm(nvfp4.quantize(np.ones((2, 64), np.float32)), nvfp4.quantize(np.ones((2, 32), np.float32))),
     nvfp4.Error, "shape_mismatch"),
    (lambda: nvfp4.gemm(nvfp4.quantize(np.ones((2, 64), np.float32)), nvfp4.quantize(np.ones((2, 64), np.float32), "mxfp8")),
     nvfp4.Error, "dtype_mismatch"),
    (lambda: nvfp4.compare(np.ones(4, np.float32), np.ones(5, np.float32)), nvfp4.Error, "shape_mismatch"),
    (lambda: nvfp4.QuantizedTensor.from_bytes("mxfp4", 2, 64, np.zeros(3, np.uint8), np.zeros(4, np.uint8)),
     nvfp4.Error, "shape_mismatch"),
    (lambda: nvfp4.load_checkpoint("/nonexistent/file.safetensors"), nvfp4.Error, "io_error"),
])
def test_errors(call, kind, code):
    with pytest.raises(kind) as info:
        call()
    if code:
        assert info.value.code == code
        assert isinstance(info.value, ValueError)


def test_linear_layer_and_recipes():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    layer = nvfp4.Linear(64, 16, bias=True)  # no quantization: fp32 FMA chains in K order
    assert nvfp4.recipe_name(layer.recipe) == "NoQuantization"
    layer.weight[:] = rng.standard_normal((16, 64)).astype(np.float32)
    layer.bias[:] = 1.0
    y = layer.forward(x)
    assert y.shape == (32, 16) and np.allclose(y, x @ layer.weight.T + 1, rtol=1e-5, atol=1e-5)
    dy = np.ones((32, 16), np.float32)
    dx = layer.backward(dy)
    assert dx.shape == (32, 64) and np.allclose(dx, dy @ layer.weight, rtol=1e-5, atol=1e-5)
    assert np.array_equal(layer.bias_grad, np.full(16, 32, np.float32))  # the sum of dY's rows
    assert np.allclose(layer.weight_grad, dy.T @ x, rtol=1e-5, atol=1e-4)
    for recipe in (nvfp4.NVFP4BlockScaling(), nvfp4.Float8CurrentScaling(), nvfp4.DelayedScaling(),
                   nvfp4.Float8BlockScaling(), nvfp4.MXFP8BlockScaling()):
        layer.recipe = recipe
        assert nvfp4.recipe_name(layer.recipe) == type(recipe).__name__
        assert nvfp4.sqnr_db(x @ layer.weight.T + 1, layer.forward(x)) > 10
        layer.backward(dy)
        state = layer.scaling_state("input")
        if isinstance(recipe, nvfp4.DelayedScaling):
            assert state["scale"] > 0 and len(state["amax_history"]) == 1024
        else:
            assert state is None
    # TE's unfused delayed-scaling update rolls the history after a step whose amax is 0; the
    # fused one (the default) does not.
    for unfused in (False, True):
        recipe = nvfp4.DelayedScaling()
        recipe.amax_history_len, recipe.unfused_update = 4, unfused
        layer.recipe = recipe
        layer.forward(x)
        layer.forward(np.zeros_like(x))
        history = layer.scaling_state("input")["amax_history"]
        amax = np.float32(np.abs(x).max())
        assert list(history[-2:]) == ([amax, 0.0] if unfused else [0.0, amax])
    # The inference forward and the kept weight (TE's is_first_microbatch).
    layer.recipe = nvfp4.NVFP4BlockScaling()
    y = layer.forward(x, weight_cache="refresh")
    assert np.array_equal(layer.infer(x), y)
    layer.weight[:] *= 2
    assert np.array_equal(layer.infer(x, weight_cache="reuse"), y)
    assert not np.array_equal(layer.infer(x), y)
    with pytest.raises(nvfp4.Error):
        layer.infer(x, weight_cache="sometimes")
    layer.recipe = nvfp4.Float8CurrentScaling()
    with pytest.raises(nvfp4.Error) as info:
        layer.infer(x, weight_cache="reuse")
    assert info.value.code == "invalid_argument"
    bad = nvfp4.NVFP4BlockScaling()
    bad.nvfp4_4over6 = "activations"  # needs disable_rht
    with pytest.raises(nvfp4.Error) as info:
        layer.recipe = bad
    assert info.value.code == "invalid_argument"
    with pytest.raises(nvfp4.Error):
        bad.nvfp4_4over6 = "everything"
    # The quantile amax (not TE): NVFP4 only, q in (0, 1].
    with pytest.raises(nvfp4.Error) as info:
        nvfp4.Linear(64, 16, nvfp4.Float8CurrentScaling(), amax_quantile=0.99)
    assert info.value.code == "unsupported"
    with pytest.raises(nvfp4.Error) as info:
        nvfp4.Linear(64, 16, nvfp4.NVFP4BlockScaling(), amax_quantile=1.5)
    assert info.value.code == "invalid_argument"
