# The quantize section of the module (issue 30): every tensor type pickles and deep-copies; float16,
# float64 and bfloat16 inputs; errors that say what to pass instead of pybind11's "incompatible
# function arguments"; dequantize() of an RHT tensor in x's space; the E2M1 / UE4M3 / E8M0 decoders
# against the formats' definitions (OCP MX v1.0, NVIDIA's NVFP4 description).
import copy
import pickle

import numpy as np
import pytest

import nvfp4


def matrix(rows=32, cols=64, seed=0, scale=1.0):
    return (np.random.default_rng(seed).normal(size=(rows, cols)) * scale).astype(np.float32)


def same_tensor(a, b):
    return (a.format == b.format and a.shape == b.shape and a.axis == b.axis and a.rht == b.rht
            and a.data.tobytes() == b.data.tobytes() and a.scales.tobytes() == b.scales.tobytes()
            and np.float32(a.amax).tobytes() == np.float32(b.amax).tobytes()
            and np.float32(a.decode_scale).tobytes() == np.float32(b.decode_scale).tobytes()
            and np.float32(a.encode_scale).tobytes() == np.float32(b.encode_scale).tobytes())


def every_quantized_tensor():
    x = matrix()
    out = [nvfp4.quantize(x, f) for f in nvfp4.formats]
    out.append(nvfp4.quantize(x, rht=True))
    out.append(nvfp4.quantize(x, "nvfp4_1x16", rounding="stochastic", seed=5))
    out.append(nvfp4.quantize(x, "mxfp4", mx_rule="te_ceil"))
    out.extend(nvfp4.quantize_rowwise_and_columnwise(x))
    out.append(nvfp4.quantize_columnwise_rht(x))
    return out


def every_fp8_tensor():
    x = matrix(256, 256)
    return [nvfp4.quantize_fp8_current(x), nvfp4.quantize_fp8_current(x, "e5m2", axis="columnwise"),
            nvfp4.quantize_fp8_with_scale(x, scale=4.0), nvfp4.quantize_fp8_blockwise(x, block="1x128"),
            nvfp4.quantize_fp8_blockwise(x, block="128x128")]


@pytest.mark.parametrize("q", every_quantized_tensor(), ids=repr)
def test_quantized_tensors_pickle_and_copy(q):
    for back in (pickle.loads(pickle.dumps(q)), pickle.loads(pickle.dumps(q, protocol=2)), copy.deepcopy(q), copy.copy(q)):
        assert same_tensor(q, back)
        assert back == q
        assert np.array_equal(back.dequantize(), q.dequantize(), equal_nan=True)
    clone = copy.deepcopy(q)
    clone.rht = not q.rht
    assert q.rht != clone.rht and clone != q  # a copy, not a view of the same object


@pytest.mark.parametrize("t", every_fp8_tensor(), ids=repr)
def test_fp8_tensors_pickle_and_copy(t):
    for back in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert back == t
        assert (back.format, back.shape, back.axis, back.block_shape, back.per_tensor) == (t.format, t.shape, t.axis, t.block_shape, t.per_tensor)
        assert back.codes.tobytes() == t.codes.tobytes() and back.scale_inv.tobytes() == t.scale_inv.tobytes()
        assert np.float32(back.amax) == np.float32(t.amax) and np.float32(back.scale) == np.float32(t.scale)


def test_a_bad_pickle_state_is_a_value_error():
    with pytest.raises(ValueError):
        nvfp4.QuantizedTensor.__new__(nvfp4.QuantizedTensor).__setstate__((99,))


def test_float16_float64_and_bfloat16_inputs():
    x = matrix(16, 64, 3)
    for dtype in (np.float16, np.float64):
        source = x.astype(dtype)
        reference = source.astype(np.float32)  # numpy's conversion (float64: round to nearest) is the reference
        for f in ("nvfp4_1x16", "mxfp4", "mxfp8"):
            assert same_tensor(nvfp4.quantize(source, f), nvfp4.quantize(reference, f)), (dtype, f)
        assert nvfp4.amax(source) == nvfp4.amax(reference)
    # bfloat16 bits: uint16 as they are; int16 or 2-byte void with input_dtype="bfloat16".
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)
    as_uint16 = nvfp4.quantize(bits)
    assert same_tensor(nvfp4.quantize(bits.view(np.int16), input_dtype="bfloat16"), as_uint16)
    assert same_tensor(nvfp4.quantize(bits.view("V2"), input_dtype="bfloat16"), as_uint16)
    values = (bits.astype(np.uint32) << 16).view(np.float32)  # the bf16 values, exactly
    assert np.array_equal(as_uint16.dequantize(), nvfp4.quantize(values).dequantize())
    with pytest.raises(TypeError, match="float16 holds IEEE halves"):
        nvfp4.quantize(x.astype(np.float16), input_dtype="bfloat16")
    with pytest.raises(ValueError, match="input_dtype"):
        nvfp4.quantize(bits, input_dtype="float8")
    # A finite float64 beyond float32's range is an overflow, not a silent Inf.
    big = x.astype(np.float64)
    big[2, 3] = 1e300
    with pytest.raises(nvfp4.Error, match="beyond float32's range") as e:
        nvfp4.quantize(big)
    assert e.value.code == "overflow"
    # Lists and tuples are arrays too.
    assert same_tensor(nvfp4.quantize(x.tolist()), nvfp4.quantize(x.astype(np.float64)))


def test_dequantize_after_rht_returns_x_space():
    x = matrix(64, 256, 4, 0.02)
    q = nvfp4.quantize(x, rht=True)
    rotated = q.dequantize(rotated=True)
    back = q.dequantize()
    # The inverse transform of the stored values, by the transform's own binding.
    assert np.array_equal(back, nvfp4.hadamard_rows(rotated, inverse=True))
    assert np.array_equal(nvfp4.dequantize(q), back)
    assert np.array_equal(nvfp4.dequantize(q, rotated=True), rotated)
    assert nvfp4.sqnr_db(x, back) > 15 > 0 > nvfp4.sqnr_db(x, rotated)
    plain = nvfp4.quantize(x)
    assert np.array_equal(plain.dequantize(), plain.dequantize(rotated=True))


def test_decoders_follow_the_format_definitions():
    e2m1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    codes = np.arange(16, dtype=np.uint8)
    want = np.array(e2m1 + [-v for v in e2m1], np.float32)
    assert np.array_equal(nvfp4.decode_e2m1(codes, packed=False), want)
    assert np.signbit(nvfp4.decode_e2m1(codes, packed=False)[8])  # code 8 is -0
    packed = (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8).reshape(2, 4)
    assert np.array_equal(nvfp4.decode_e2m1(packed), want.reshape(2, 8))
    q = nvfp4.quantize(matrix(8, 64, 5))
    restored = (nvfp4.decode_e2m1(q.data) * np.repeat(nvfp4.decode_ue4m3(q.scales), 16, axis=1) * q.decode_scale).astype(np.float32)
    assert np.allclose(restored, q.dequantize(), rtol=1e-6, atol=0)
    # UE4M3: 4 exponent bits (bias 7), 3 mantissa bits, subnormals at exponent 0, 0x7F NaN.
    ue = np.arange(127, dtype=np.uint8)
    exponent, mantissa = (ue >> 3).astype(np.int32), (ue & 7).astype(np.float64)
    want = np.where(exponent == 0, mantissa / 8 * 2.0 ** -6, (1 + mantissa / 8) * 2.0 ** (exponent - 7)).astype(np.float32)
    assert np.array_equal(nvfp4.decode_ue4m3(ue), want)
    assert np.isnan(nvfp4.decode_ue4m3(np.array([0x7F], np.uint8))[0])
    # E8M0: 2^(byte - 127), 0xFF NaN.
    e8 = np.arange(255, dtype=np.uint8)
    assert np.array_equal(nvfp4.decode_e8m0(e8), (2.0 ** (e8.astype(np.float64) - 127)).astype(np.float32))
    assert np.isnan(nvfp4.decode_e8m0(np.array([255], np.uint8))[0])
    assert np.array_equal(nvfp4.decode_e8m0([[127, 128]]), np.array([[1.0, 2.0]], np.float32))
    with pytest.raises(nvfp4.Error, match="not a 4-bit code"):
        nvfp4.decode_e2m1(np.array([16], np.uint8), packed=False)
    with pytest.raises(nvfp4.Error, match="not a byte value"):
        nvfp4.decode_e8m0([300])
    with pytest.raises(TypeError, match="uint8"):
        nvfp4.decode_ue4m3(np.zeros(3, np.float32))


@pytest.mark.parametrize("call,kind,says", [
    (lambda: nvfp4.quantize("abc"), TypeError, "argument 'x' must be a 2-D numpy array"),
    (lambda: nvfp4.quantize(), TypeError, "argument 'x' is missing"),
    (lambda: nvfp4.quantize(matrix(), 3), TypeError, "argument 'format' must be a format name"),
    (lambda: nvfp4.quantize(matrix(), seed=-1), TypeError, "'seed' must be a non-negative int"),
    (lambda: nvfp4.quantize(matrix(), seed="7"), TypeError, "'seed' must be a non-negative int"),
    (lambda: nvfp4.quantize(matrix(), amax="big"), TypeError, "'amax' must be a float or None"),
    (lambda: nvfp4.quantize(matrix(), rht=1), TypeError, "'rht' must be a bool"),
    (lambda: nvfp4.quantize(matrix(), "nvfp4_1x16", "stochastic"), TypeError, "'rounding' is keyword-only"),
    (lambda: nvfp4.quantize(matrix(), fmt="mxfp4"), TypeError, "has no argument 'fmt'; its arguments: x, format"),
    (lambda: nvfp4.quantize(np.zeros((4, 32), np.int32)), TypeError, "convert with .astype(numpy.float32)"),
    (lambda: nvfp4.quantize(np.zeros(32, np.float32)), ValueError, "reshape it first"),
    (lambda: nvfp4.quantize(matrix(), "nvfp5"), nvfp4.Error, "one of: nvfp4_1x16"),
    (lambda: nvfp4.quantize_rowwise_and_columnwise(matrix(), axis="rowwise"), TypeError, "has no argument 'axis'"),
    (lambda: nvfp4.dequantize(3), TypeError, "'q' must be a QuantizedTensor or an Fp8Tensor"),
    (lambda: nvfp4.dequantize(nvfp4.quantize(matrix()), rotated="yes"), TypeError, "'rotated' must be a bool"),
    (lambda: nvfp4.decode_e2m1(np.zeros(2, np.uint8), packed=None), TypeError, "'packed' must be a bool"),
])
def test_bad_arguments_say_what_to_pass(call, kind, says):
    with pytest.raises(kind) as e:
        call()
    assert says in str(e.value)
    assert "incompatible function arguments" not in str(e.value)
