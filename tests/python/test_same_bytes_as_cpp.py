# The Python module gives the C++ API's bytes: every mode quantized here from the same input is
# compared with what tests/python/write_reference.cpp stored (read back by a parser written here,
# not by the module), and so are the RHT, the GEMMs, dequantize and the metrics.
import numpy as np
import pytest

import nvfp4
from conftest import read_safetensors_raw

MODES = {
    # stored name: (input, format, keyword arguments)
    "nvfp4_1x16": ("x", "nvfp4_1x16", {}),
    "nvfp4_16x16": ("x", "nvfp4_16x16", {}),
    "mxfp4_ocp": ("x", "mxfp4", {}),
    "mxfp4_te": ("x", "mxfp4", {"mx_rule": "te_ceil"}),
    "mxfp8": ("x", "mxfp8", {}),
    "mxfp8_te": ("x_bf16", "mxfp8", {"mx_rule": "te_ceil"}),
    "nvfp4_sr": ("x", "nvfp4_1x16", {"rounding": "stochastic", "seed": 7}),
    "nvfp4_from_bf16": ("x_bf16", "nvfp4_1x16", {}),
    "nvfp4_amax_100": ("x", "nvfp4_1x16", {"amax": 100.0}),
    "rowwise_rht": ("x", "nvfp4_1x16", {"rht": True}),
}


@pytest.fixture(scope="module")
def ref(reference_dir):
    tensors, metadata = read_safetensors_raw(reference_dir / "reference.safetensors")
    arrays = {p.stem: np.load(p) for p in reference_dir.glob("*.npy")}
    return tensors, metadata, arrays


def stored_bytes(tensors, name):
    return (np.frombuffer(tensors[name + ".weight"][2], np.uint8), np.frombuffer(tensors[name + ".weight_scale"][2], np.uint8))


@pytest.mark.parametrize("name", sorted(MODES))
def test_quantize_gives_the_cpp_bytes(ref, name):
    tensors, _, arrays = ref
    source, fmt, kwargs = MODES[name]
    q = nvfp4.quantize(arrays[source], fmt, **kwargs)
    data, scales = stored_bytes(tensors, name)
    assert q.data.tobytes() == data.tobytes()
    assert q.scales.tobytes() == scales.tobytes()
    if fmt.startswith("nvfp4"):
        (scale_2,) = np.frombuffer(tensors[name + ".weight_scale_2"][2], np.float32)
        assert np.float32(q.decode_scale) == scale_2


def test_columnwise_copies_give_the_cpp_bytes(ref):
    tensors, _, arrays = ref
    rowwise, columnwise = nvfp4.quantize_rowwise_and_columnwise(arrays["x"], "nvfp4_1x16")
    assert columnwise.axis == "columnwise" and columnwise.shape == (256, 64)
    assert rowwise.amax == columnwise.amax
    data, scales = stored_bytes(tensors, "pair_columnwise")
    assert columnwise.data.tobytes() == data.tobytes() and columnwise.scales.tobytes() == scales.tobytes()
    rht = nvfp4.quantize_columnwise_rht(arrays["x_bf16"])
    data, scales = stored_bytes(tensors, "columnwise_rht")
    assert rht.data.tobytes() == data.tobytes() and rht.scales.tobytes() == scales.tobytes()


def test_swizzled_scales_give_the_cpp_bytes(ref):
    tensors, _, arrays = ref
    q = nvfp4.quantize(arrays["x"], "nvfp4_1x16")
    dtype, shape, raw = tensors["swizzled.weight_scale"]
    assert list(q.swizzled_scales().shape) == shape == [128, 16]
    assert q.swizzled_scales().tobytes() == raw


def test_rht_gives_the_cpp_bits(ref):
    _, _, arrays = ref
    te = nvfp4.hadamard_rows(arrays["x"])
    assert te.dtype == np.float32
    assert np.array_equal(te.view(np.uint32) >> 16, arrays["rht16"].astype(np.uint32))
    assert not np.any(te.view(np.uint32) & 0xFFFF)  # bf16 values, widened exactly
    r64 = nvfp4.hadamard_rows(arrays["x"], nvfp4.HadamardTransform.random(64, 3))
    assert np.array_equal(r64.view(np.uint32) >> 16, arrays["rht64_seed3"].astype(np.uint32))


def test_gemm_gives_the_cpp_bits(ref):
    _, _, arrays = ref
    a = nvfp4.quantize(arrays["x"], "nvfp4_1x16")
    b = nvfp4.quantize(arrays["b"], "nvfp4_16x16")
    assert nvfp4.gemm(a, b).tobytes() == arrays["gemm_exact"].tobytes()
    assert nvfp4.gemm(a, b, mode="relaxed").tobytes() == arrays["gemm_relaxed"].tobytes()
    assert nvfp4.gemm(a, b, out_dtype="bfloat16").tobytes() == arrays["gemm_exact_bf16"].tobytes()
    mx = nvfp4.gemm(nvfp4.quantize(arrays["x"], "mxfp4"), nvfp4.quantize(arrays["b"], "mxfp4"))
    assert mx.tobytes() == arrays["gemm_mxfp4"].tobytes()


def test_dequantize_and_metrics_give_the_cpp_values(ref):
    _, _, arrays = ref
    q = nvfp4.quantize(arrays["x"], "nvfp4_1x16")
    restored = nvfp4.dequantize(q)
    assert restored.tobytes() == arrays["dequantized_1x16"].tobytes()
    e = nvfp4.compare(arrays["x"], restored)
    got = [e.mse, e.rmse, e.sqnr_db, e.max_abs_error, e.max_rel_error, e.cosine_similarity]
    assert got == list(arrays["metrics_1x16"])  # the same double sums, bit for bit
    assert nvfp4.sqnr_db(arrays["x"], restored) == e.sqnr_db


def test_the_cpp_checkpoint_loads_as_it_was_stored(ref, reference_dir):
    tensors, _, arrays = ref
    loaded = nvfp4.load_checkpoint(str(reference_dir / "reference.safetensors"))
    assert set(loaded) >= set(MODES)
    for name in MODES:
        data, scales = stored_bytes(tensors, name)
        assert loaded[name].data.tobytes() == data.tobytes(), name
        assert loaded[name].scales.tobytes() == scales.tobytes(), name
    assert loaded["swizzled"].scales.tobytes() == stored_bytes(tensors, "nvfp4_1x16")[1].tobytes()  # unswizzled
    assert loaded["rowwise_rht"].rht and not loaded["nvfp4_1x16"].rht
    info = nvfp4.describe_checkpoint_tensor(str(reference_dir / "reference.safetensors"), "nvfp4_sr")
    assert info["rounding"] == "stochastic" and info["seed"] == 7 and info["format"] == "nvfp4_1x16"
    # dequantize_checkpoint_tensor and dequantize() undo the recorded RHT: close to x, unlike the
    # rotated values (rotated=True).
    x = arrays["x"]
    back = nvfp4.dequantize_checkpoint_tensor(str(reference_dir / "reference.safetensors"), "rowwise_rht")
    assert back.shape == x.shape
    assert nvfp4.sqnr_db(x, back) > 15 > nvfp4.sqnr_db(x, nvfp4.dequantize(loaded["rowwise_rht"], rotated=True))
    assert np.array_equal(nvfp4.dequantize(loaded["rowwise_rht"]), back)


def test_a_checkpoint_written_here_has_the_cpp_bytes(ref, tmp_path):
    tensors, metadata, arrays = ref
    path = tmp_path / "ours.safetensors"
    qs = {name: nvfp4.quantize(arrays[MODES[name][0]], MODES[name][1], **MODES[name][2]) for name in MODES}
    nvfp4.save_checkpoint(str(path), qs)
    ours, our_metadata = read_safetensors_raw(path)
    for name in MODES:
        for suffix in (".weight", ".weight_scale", ".weight_scale_2"):
            if name + suffix in tensors:
                assert ours[name + suffix] == tensors[name + suffix], name + suffix
        assert our_metadata["nvfp4." + name] == metadata["nvfp4." + name], name


def test_linear_layer_gives_the_cpp_bits(ref):
    _, _, arrays = ref
    recipe = nvfp4.NVFP4BlockScaling()
    layer = nvfp4.Linear(256, 48, recipe, seed=5)
    assert nvfp4.recipe_name(layer.recipe) == "NVFP4BlockScaling"
    layer.weight[:] = arrays["b"]
    y = layer.forward(arrays["x"])
    dx = layer.backward(arrays["linear_dy"])
    assert y.tobytes() == arrays["linear_y"].tobytes()
    assert dx.tobytes() == arrays["linear_dx"].tobytes()
    assert layer.weight_grad.tobytes() == arrays["linear_dw"].tobytes()
    quantile = nvfp4.Linear(256, 48, recipe, seed=5, amax_quantile=0.99)
    quantile.weight[:] = arrays["b"]
    y99 = quantile.forward(arrays["x"])
    assert y99.tobytes() == arrays["linear_q99_y"].tobytes() and y99.tobytes() != y.tobytes()
    assert quantile.backward(arrays["linear_dy"]).tobytes() == arrays["linear_q99_dx"].tobytes()


FP8_QUANTIZERS = {
    # stored name: (input, quantizer, positional and keyword arguments)
    "x_current": ("x", nvfp4.quantize_fp8_current, (), {}),
    "b_current": ("b", nvfp4.quantize_fp8_current, (), {}),
    "b_e5m2_pow2": ("b", nvfp4.quantize_fp8_current, ("e5m2",), {"power_2_scale": True}),
    "x_scaled": ("x_bf16", nvfp4.quantize_fp8_with_scale, (), {"scale": 3.0}),
    "x_1x128": ("x", nvfp4.quantize_fp8_blockwise, (), {}),
    "b_128x128": ("b", nvfp4.quantize_fp8_blockwise, ("e4m3", "128x128"), {}),
}


def fp8_quantized(arrays, name):
    source, quantizer, args, kwargs = FP8_QUANTIZERS[name]
    return quantizer(arrays[source], *args, **kwargs)


@pytest.mark.parametrize("name", sorted(FP8_QUANTIZERS))
def test_fp8_quantizers_give_the_cpp_bytes(ref, name):
    _, _, arrays = ref
    q = fp8_quantized(arrays, name)
    assert q.codes.tobytes() == arrays[f"fp8_{name}_codes"].tobytes()
    assert q.scale_inv.shape == arrays[f"fp8_{name}_scale_inv"].shape
    assert q.scale_inv.tobytes() == arrays[f"fp8_{name}_scale_inv"].tobytes()


def test_fp8_gemms_give_the_cpp_bits(ref):
    _, _, arrays = ref
    q = {name: fp8_quantized(arrays, name) for name in FP8_QUANTIZERS}
    assert nvfp4.fp8_gemm(q["x_current"], q["b_current"]).tobytes() == arrays["fp8_gemm_current"].tobytes()
    assert nvfp4.fp8_gemm(q["x_current"], q["b_e5m2_pow2"]).tobytes() == arrays["fp8_gemm_hybrid"].tobytes()
    assert nvfp4.fp8_gemm(q["x_1x128"], q["b_128x128"]).tobytes() == arrays["fp8_gemm_blockwise"].tobytes()
    blackwell = nvfp4.fp8_gemm(q["x_current"], q["b_current"], core="blackwell", promotion_interval=0,
                               bias=arrays["fp8_bias"][0], out_dtype="bfloat16")
    assert blackwell.dtype == np.uint16 and blackwell.tobytes() == arrays["fp8_gemm_blackwell_bias_bf16"].tobytes()
    relaxed = nvfp4.fp8_gemm(q["x_current"], q["b_current"], mode="relaxed")
    assert relaxed.tobytes() == arrays["fp8_gemm_relaxed"].tobytes()
    assert nvfp4.fp8_mma(q["x_current"], q["b_current"]).tobytes() == arrays["fp8_mma"].tobytes()
    # The same GEMM on tensors rebuilt from the C++ program's bytes (what a GPU kernel would hand over).
    a = nvfp4.Fp8Tensor.from_bytes("e4m3", arrays["fp8_x_1x128_codes"], arrays["fp8_x_1x128_scale_inv"], block="1x128")
    b = nvfp4.Fp8Tensor.from_bytes("e4m3", arrays["fp8_b_128x128_codes"], arrays["fp8_b_128x128_scale_inv"], block="128x128")
    assert nvfp4.fp8_gemm(a, b).tobytes() == arrays["fp8_gemm_blockwise"].tobytes()
    mx_x, mx_b = nvfp4.quantize(arrays["x"], "mxfp8"), nvfp4.quantize(arrays["b"], "mxfp8")
    assert nvfp4.mxfp8_gemm(mx_x, mx_b).tobytes() == arrays["mxfp8_gemm"].tobytes()
    assert nvfp4.mxfp8_mma(mx_x, mx_b, promotion_interval=0).tobytes() == arrays["mxfp8_mma_plain"].tobytes()
    # Different options give different bits here, so each comparison above pins its option down.
    distinct = [arrays[k].tobytes() for k in ("fp8_gemm_current", "fp8_gemm_relaxed", "fp8_mma", "mxfp8_gemm", "mxfp8_mma_plain")]
    assert len(set(distinct)) == len(distinct)
