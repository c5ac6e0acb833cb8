# The Python module against the peers' golden vectors (tests/golden/, see its README): NVFP4
# quantization as TransformerEngine's reference does it, the cuBLAS 128x4 scale layout as
# torchao's to_blocked lays it out, and the block-scaled GEMM as MMA-Sim computes it.
import numpy as np
import pytest

import nvfp4
from conftest import bf16_bits


def cases(golden, kind, **match):
    directory, manifest = golden
    found = [c for c in manifest["cases"] if c["kind"] == kind and all(c.get(k) == v for k, v in match.items())]
    assert found, f"no {kind} cases {match} in {directory}"
    return [(c, lambda field, c=c: np.load(directory / c[field])) for c in found]


def same_codes(ours, theirs):
    """Packed E2M1 bytes equal, where an exact zero may be +0 (0x0) or -0 (0x8) (a documented
    quirk of TE's reference: it maps an exact -0.0 input to 0x0)."""
    a = np.stack([ours & 0xF, ours >> 4]).astype(np.uint8)
    b = np.stack([theirs & 0xF, theirs >> 4]).astype(np.uint8)
    return bool(np.all((a == b) | (((a & 7) == 0) & ((b & 7) == 0))))


@pytest.mark.parametrize("mode,fmt", [("1d", "nvfp4_1x16"), ("2d", "nvfp4_16x16")])
def test_nvfp4_quantize_matches_transformer_engine(golden, mode, fmt):
    for c, load in cases(golden, "nvfp4_quantize", mode=mode):
        x = bf16_bits(load("input_bf16_as_f32"))
        rowwise, columnwise = nvfp4.quantize_rowwise_and_columnwise(x, fmt)
        assert same_codes(rowwise.data, load("data")), c
        assert np.array_equal(rowwise.scales, load("scale_e4m3")), c
        assert same_codes(columnwise.data, load("data_t")), c
        assert np.array_equal(columnwise.scales, load("scale_t_e4m3")), c
        assert rowwise.amax == c["amax_row"] and columnwise.amax == c["amax_col"], c


def test_columnwise_rht_copy_matches_transformer_engine(golden):
    for c, load in cases(golden, "nvfp4_quantize", mode="1d_rht"):
        peer_rht = load("rht_col_input_bf16_as_f32")
        # The peer's RHT output quantized along M gives its data_t / scale_t bit for bit.
        q = nvfp4.quantize(bf16_bits(peer_rht), "nvfp4_1x16", axis="columnwise")
        assert same_codes(q.data, load("data_t")) and np.array_equal(q.scales, load("scale_t_e4m3")), c
        assert q.amax == c["amax_col"], c
        # Our RHT of x is the peer's within one bf16 ulp (it accumulates in fp32 first).
        ours, amax = nvfp4.rht_columnwise(bf16_bits(load("input_bf16_as_f32")))
        ulps = np.abs(bf16_bits(ours).astype(np.int32) - bf16_bits(peer_rht).astype(np.int32))
        assert ours.shape == peer_rht.shape and ulps.max() <= 1, c


def test_swizzle_matches_torchao(golden):
    for c, load in cases(golden, "swizzle_128x4"):
        compact = load("compact")
        rows, scale_cols = compact.shape
        # A 1x16 NVFP4 tensor whose scales are exactly these bytes (elements zero).
        data = np.zeros((rows, scale_cols * 8), np.uint8)
        q = nvfp4.QuantizedTensor.from_bytes("nvfp4_1x16", rows, scale_cols * 16, data, compact, amax=1.0)
        assert q.swizzled_scales().tobytes() == load("swizzled").tobytes(), c


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4"])
def test_block_scaled_mma_matches_mma_sim(golden, fmt):
    for c, load in cases(golden, "gemm_block_scaled", format=fmt):
        name = "nvfp4_1x16" if fmt == "nvfp4" else "mxfp4"
        a = nvfp4.QuantizedTensor.from_bytes(name, c["m"], c["k"], load("a_packed"), load("a_scale"))
        b = nvfp4.QuantizedTensor.from_bytes(name, c["n"], c["k"], load("b_packed"), load("b_scale"))
        d = nvfp4.block_scaled_mma(a, b, load("c"))
        assert d.view(np.uint32).tobytes() == load("d").view(np.uint32).tobytes(), (c["style"], c["m"], c["n"], c["k"])


@pytest.mark.parametrize("arch,core", [("hopper_wgmma", "hopper"), ("blackwell_f8f6f4", "blackwell")])
def test_fp8_mma_matches_mma_sim(golden, arch, core):
    for c, load in cases(golden, "gemm_fp8", arch=arch):
        a = nvfp4.Fp8Tensor.from_bytes(c["a_format"], load("a"))
        b = nvfp4.Fp8Tensor.from_bytes(c["b_format"], load("b"))
        # promotion_interval=0: the tensor core's own chain, which MMA-Sim models
        d = nvfp4.fp8_mma(a, b, load("c"), core=core, promotion_interval=0)
        assert d.view(np.uint32).tobytes() == load("d").view(np.uint32).tobytes(), (c["style"], c["a_format"], c["b_format"])


def test_mxfp8_mma_matches_mma_sim(golden):
    # The module's "mxfp8" tensors hold E4M3 elements, so the E4M3 x E4M3 cases.
    for c, load in cases(golden, "gemm_fp8", arch="blackwell_mxf8f6f4", a_format="e4m3", b_format="e4m3"):
        a = nvfp4.QuantizedTensor.from_bytes("mxfp8", c["m"], c["k"], load("a"), load("a_scale"))
        b = nvfp4.QuantizedTensor.from_bytes("mxfp8", c["n"], c["k"], load("b"), load("b_scale"))
        d = nvfp4.mxfp8_mma(a, b, load("c"), promotion_interval=0)
        assert d.view(np.uint32).tobytes() == load("d").view(np.uint32).tobytes(), c["style"]
