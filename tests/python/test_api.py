# The Python module's own contract: shapes and dtypes of what it returns, hand-worked values,
# layouts (strided and transposed arrays quantize like their C-order copies), errors.
import numpy as np
import pytest

import nvfp4


def test_module_says_what_it_is():
    assert nvfp4.__version__.count(".") == 2
    assert nvfp4.compiled_isa in ("avx512", "avx2", "scalar")
    assert nvfp4.formats == ("nvfp4_1x16", "nvfp4_16x16", "mxfp4", "mxfp8", "mxfp8_e5m2")


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
                                                       ("mxfp8", 80, 3), ("mxfp8_e5m2", 80, 3)])
def test_shapes_of_every_format(fmt, data_cols, scale_cols):
    x = np.random.default_rng(1).standard_normal((33, 80)).astype(np.float32)
    q = nvfp4.quantize(x, fmt)
    assert q.format == fmt and q.shape == (33, 80) and q.axis == "rowwise"
    assert q.data.shape == (33, data_cols) and q.scales.shape == (33, scale_cols)
    assert nvfp4.dequantize(q).shape == (33, 80)
    assert not q.data.flags.writeable and not q.scales.flags.writeable


def e5m2_nearest_even(v):
    """float64 values rounded to E5M2 (2 mantissa bits, exponents from -14, subnormals below),
    ties to even, saturating at 57344: written from the format's definition (OCP FP8)."""
    exponent = np.maximum(np.floor(np.log2(np.maximum(np.abs(v), 2.0 ** -40))), -14)
    quantum = 2.0 ** (exponent - 2)
    return np.clip(np.round(v / quantum) * quantum, -57344.0, 57344.0)  # np.round: ties to even


def test_mxfp8_e5m2_follows_the_ocp_rule():
    # OCP MX (floor rule): each block of 32 shares 2^s, s = floor(log2(amax)) - 15, 15 being
    # E5M2's largest exponent; its elements are x / 2^s rounded to E5M2, saturating. Rows of four
    # magnitudes; in row 1's first block (amax 1.9, s = -15) ties to even (1.125 -> 1,
    # -1.375 -> -1.5, 0.5625 -> 0.5) and 1.9 * 2^15, past E5M2's top, saturating to 1.75.
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((4, 64)) * np.array([[1e-3], [1.0], [1e3], [3e30]])).astype(np.float32)
    x[1, :32] = np.clip(x[1, :32], -1.5, 1.5)
    x[1, :4] = [1.125, -1.375, 1.9, 0.5625]
    q = nvfp4.quantize(x, "mxfp8_e5m2")
    assert q.format == "mxfp8_e5m2" and q.data.shape == (4, 64) and q.scales.shape == (4, 2)
    blocks = x.astype(np.float64).reshape(4, 2, 32)
    shared = np.floor(np.log2(np.abs(blocks).max(axis=2))) - 15
    assert np.array_equal(q.scales, (shared + 127).astype(np.uint8))
    expected = e5m2_nearest_even(blocks / 2.0 ** shared[..., None]) * 2.0 ** shared[..., None]
    assert np.array_equal(nvfp4.dequantize(q), expected.reshape(4, 64).astype(np.float32))
    assert q.scales[1, 0] == 127 - 15 and list(nvfp4.dequantize(q)[1, :4]) == [1.0, -1.5, 1.75, 0.5]
    # It pairs with E4M3 in the MXFP8 GEMM (dgrad's dY x W), and has no checkpoint layout.
    w = nvfp4.quantize(rng.standard_normal((8, 64)).astype(np.float32), "mxfp8")
    assert nvfp4.mxfp8_gemm(q, w).shape == (4, 8)
    with pytest.raises(nvfp4.Error) as info:
        nvfp4.save_checkpoint("/nonexistent-dir/never-written.safetensors", {"g": q})
    assert info.value.code == "unsupported"


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
    (lambda: nvfp4.quantize(np.zeros((4, 32), np.int32)), TypeError, None),  # float64 is accepted (test_tensors.py)
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
    layer.recipe = nvfp4.Float8CurrentScaling()  # the kept W belongs to the old recipe: a miss
    assert np.array_equal(layer.infer(x, weight_cache="reuse"), layer.infer(x))  # quantized and kept (TE)
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


def one_step_operands():
    """Codes of one K=32 step whose products are 1, 1, 2^-13, 2^-14 (E4M3: 0x38 = 1, 0x08 = 2^-6, 0x04 = 2^-7)."""
    a = np.zeros((1, 32), np.uint8)
    b = np.zeros((1, 32), np.uint8)
    a[0, :4] = [0x38, 0x38, 0x04, 0x04]
    b[0, :4] = [0x38, 0x38, 0x08, 0x04]
    return a, b


def test_hand_worked_fp8_step():
    # §9 of NUMERICS.md. E_max = 0. Hopper (F = 13): the 2^-14 term is truncated away (step 5), the sum
    # 2 + 2^-13 has exponent 1 and keeps only 13 fraction bits, so the 2^-13 goes too (step 6): 2.0.
    # Blackwell (F = 25, 23 bits) keeps everything: 2 + 3 * 2^-14; so does the relaxed fp32 chain.
    a_codes, b_codes = one_step_operands()
    a = nvfp4.Fp8Tensor.from_bytes("e4m3", a_codes, 0.5)
    b = nvfp4.Fp8Tensor.from_bytes("e4m3", b_codes, 4.0)
    exact_sum = np.float32(2 + 3 * 2.0**-14)
    assert nvfp4.fp8_mma(a, b)[0, 0] == 2.0
    assert nvfp4.fp8_mma(a, b, core="blackwell")[0, 0] == exact_sum
    assert nvfp4.fp8_mma(a, b, mode="relaxed")[0, 0] == exact_sum
    c = np.full((1, 1), 1.0, np.float32)
    assert nvfp4.fp8_mma(a, b, c, promotion_interval=0)[0, 0] == 3.0  # c enters the step: 3 + 2^-13 cut to 3
    assert nvfp4.fp8_mma(a, b, c, core="blackwell", promotion_interval=0)[0, 0] == np.float32(3 + 3 * 2.0**-14)
    # fp8_gemm: alpha = scale_inv_A * scale_inv_B = 2, then + bias.
    assert nvfp4.fp8_gemm(a, b)[0, 0] == 4.0
    assert nvfp4.fp8_gemm(a, b, core="blackwell")[0, 0] == np.float32(2) * exact_sum
    assert nvfp4.fp8_gemm(a, b, bias=np.array([0.5], np.float32))[0, 0] == 4.5
    assert nvfp4.fp8_gemm(a, b, out_dtype="bfloat16")[0, 0] == 0x4080  # 4.0 in bf16
    # The MXFP8 chain is Blackwell's: E8M0 scales 2^1 (0x80) and 2^-1 (0x7E) multiply to 1.
    mx_a = nvfp4.QuantizedTensor.from_bytes("mxfp8", 1, 32, a_codes, np.array([0x80], np.uint8))
    mx_b = nvfp4.QuantizedTensor.from_bytes("mxfp8", 1, 32, b_codes, np.array([0x7E], np.uint8))
    assert nvfp4.mxfp8_mma(mx_a, mx_b)[0, 0] == exact_sum
    assert nvfp4.mxfp8_gemm(mx_a, mx_b)[0, 0] == exact_sum


def test_fp8_tensor_from_bytes():
    codes = np.array([[0x38, 0xB8, 0x7E]], np.uint8)  # E4M3 1, -1, 448
    t = nvfp4.Fp8Tensor.from_bytes("e4m3", codes, 0.25, amax=112.0)
    assert t.format == "e4m3" and t.shape == (1, 3) and t.per_tensor and t.axis == "rowwise"
    assert t.amax == 112.0 and t.scale_inv.shape == (1, 1) and t.scale_inv.dtype == np.float32
    assert np.array_equal(t.dequantize(), np.array([[0.25, -0.25, 112.0]], np.float32))
    assert np.array_equal(nvfp4.dequantize(t), t.dequantize())
    assert not t.codes.flags.writeable and not t.scale_inv.flags.writeable
    e5m2 = nvfp4.Fp8Tensor.from_bytes("e5m2", np.array([[0x3C, 0x7B]], np.uint8))  # 1, 57344
    assert np.array_equal(e5m2.dequantize(), np.array([[1.0, 57344.0]], np.float32))
    blocks = nvfp4.Fp8Tensor.from_bytes("e4m3", np.full((2, 130), 0x38, np.uint8),
                                        np.array([[1, 2], [4, 8]], np.float32), block="1x128")
    assert blocks.block_shape == (1, 128) and blocks.scale_inv.shape == (2, 2) and not blocks.per_tensor
    assert blocks.dequantize()[1, 127] == 4 and blocks.dequantize()[1, 128] == 8


def test_hand_worked_fp8_quantizers():
    x = np.zeros((1, 130), np.float32)
    x[0, 0], x[0, 1], x[0, 128] = 3.0, -1.5, 0.5
    # Float8BlockScaling (power-of-2 scales by default): block 0 amax 3, 448/3 -> 128; block 1
    # amax 0.5, 896 -> 512. 3 * 128 = 384 is E4M3 0x7C, 0.5 * 512 = 256 is 0x78.
    q = nvfp4.quantize_fp8_blockwise(x)
    assert q.block_shape == (1, 128) and q.amax == 3.0
    assert np.array_equal(q.scale_inv, np.array([[2.0**-7, 2.0**-9]], np.float32))
    assert q.codes[0, 0] == 0x7C and q.codes[0, 1] == 0xF4 and q.codes[0, 128] == 0x78  # -1.5 * 128 = -192
    assert np.array_equal(q.dequantize(), x)
    assert nvfp4.quantize_fp8_blockwise(x, "e4m3", "128x128").block_shape == (128, 128)
    # Float8CurrentScaling: scale = fp32(448 / 3), scale_inv its fp32 reciprocal; 3 * scale -> 448 (0x7E).
    c = nvfp4.quantize_fp8_current(x)
    assert c.scale == np.float32(448) / np.float32(3)
    assert c.scale_inv[0, 0] == np.float32(1) / np.float32(c.scale) and c.codes[0, 0] == 0x7E
    assert nvfp4.quantize_fp8_current(x, power_2_scale=True).scale == 128.0
    assert nvfp4.quantize_fp8_current(x, "e5m2").scale == np.float32(57344) / np.float32(3)
    s = nvfp4.quantize_fp8_with_scale(x, scale=2.0)
    assert s.scale == 2.0 and s.scale_inv[0, 0] == 0.5 and s.amax == 3.0 and s.codes[0, 0] == 0x4C  # 6.0
    assert nvfp4.quantize_fp8_current(x.T, axis="columnwise").axis == "columnwise"


def test_fp8_gemm_options_change_the_result():
    rng = np.random.default_rng(9)
    a = nvfp4.quantize_fp8_current(rng.standard_normal((16, 512)).astype(np.float32))
    b = nvfp4.quantize_fp8_current(rng.standard_normal((8, 512)).astype(np.float32))
    base = nvfp4.fp8_gemm(a, b)
    reference = nvfp4.dequantize(a).astype(np.float64) @ nvfp4.dequantize(b).T.astype(np.float64)
    assert base.shape == (16, 8) and nvfp4.sqnr_db(reference.astype(np.float32), base) > 60
    for kwargs in ({"core": "blackwell"}, {"promotion_interval": 0}, {"mode": "relaxed"}):
        assert not np.array_equal(nvfp4.fp8_gemm(a, b, **kwargs), base), kwargs


@pytest.mark.parametrize("call,kind,code", [
    (lambda: nvfp4.quantize_fp8_current(np.zeros((4, 32), np.float32), "e3m4"), nvfp4.Error, "invalid_argument"),
    (lambda: nvfp4.quantize_fp8_current(np.array([[1.0, np.nan]], np.float32)), nvfp4.Error, "non_finite_input"),
    (lambda: nvfp4.quantize_fp8_current(np.zeros(32, np.float32)), ValueError, None),
    (lambda: nvfp4.quantize_fp8_with_scale(np.ones((2, 32), np.float32), scale=0.0), nvfp4.Error, "invalid_argument"),
    (lambda: nvfp4.quantize_fp8_blockwise(np.ones((2, 32), np.float32), "e4m3", "64x64"), nvfp4.Error, "invalid_argument"),
    (lambda: nvfp4.Fp8Tensor.from_bytes("e4m3", np.zeros(32, np.uint8)), nvfp4.Error, "shape_mismatch"),
    (lambda: nvfp4.Fp8Tensor.from_bytes("e4m3", np.zeros((2, 256), np.uint8), np.ones(3, np.float32), block="1x128"),
     nvfp4.Error, "shape_mismatch"),
    (lambda: nvfp4.Fp8Tensor.from_bytes("e4m3", np.zeros((2, 256), np.uint8), 1.0, block="1x128"), nvfp4.Error, "shape_mismatch"),
    (lambda: nvfp4.Fp8Tensor.from_bytes("e4m3", np.zeros((2, 32), np.float32)), TypeError, None),
    (lambda: nvfp4.Fp8Tensor.from_bytes("e4m3", np.zeros((2, 32), np.uint8), np.ones(1, np.float64)), TypeError, None),
    (lambda: nvfp4.fp8_gemm(nvfp4.Fp8Tensor.from_bytes("e4m3", np.zeros((2, 64), np.uint8)),
                            nvfp4.Fp8Tensor.from_bytes("e4m3", np.zeros((2, 32), np.uint8))), nvfp4.Error, "shape_mismatch"),
    (lambda: nvfp4.fp8_gemm(nvfp4.quantize_fp8_current(np.ones((2, 128), np.float32)),
                            nvfp4.quantize_fp8_blockwise(np.ones((2, 128), np.float32))), nvfp4.Error, "invalid_argument"),
    (lambda: nvfp4.fp8_gemm(*[nvfp4.quantize_fp8_current(np.ones((2, 64), np.float32))] * 2, promotion_interval=48),
     nvfp4.Error, "invalid_argument"),
    (lambda: nvfp4.fp8_gemm(*[nvfp4.quantize_fp8_current(np.ones((2, 64), np.float32))] * 2, core="ampere"),
     nvfp4.Error, "invalid_argument"),
    (lambda: nvfp4.fp8_gemm(*[nvfp4.quantize_fp8_current(np.ones((2, 64), np.float32))] * 2, bias=np.ones(3, np.float32)),
     nvfp4.Error, "shape_mismatch"),
    (lambda: nvfp4.fp8_gemm(*[nvfp4.quantize_fp8_current(np.ones((2, 64), np.float32))] * 2, out_dtype="float16"),
     nvfp4.Error, "invalid_argument"),
    (lambda: nvfp4.fp8_mma(*[nvfp4.quantize_fp8_current(np.ones((2, 64), np.float32))] * 2, np.ones((2, 3), np.float32)),
     nvfp4.Error, "shape_mismatch"),
    (lambda: nvfp4.mxfp8_gemm(nvfp4.quantize(np.ones((2, 64), np.float32), "mxfp8"), nvfp4.quantize(np.ones((2, 64), np.float32))),
     nvfp4.Error, "dtype_mismatch"),
    (lambda: nvfp4.mxfp8_mma(*[nvfp4.quantize(np.ones((2, 64), np.float32), "mxfp8")] * 2, mode="fast"),
     nvfp4.Error, "invalid_argument"),
])
def test_fp8_errors(call, kind, code):
    with pytest.raises(kind) as info:
        call()
    if code:
        assert info.value.code == code
