# nvfp4.torch.extras.functional: torch tensors in and out of the extension's calls, the same bytes as the numpy
# calls; float32 read in place, bf16 by its bits.
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4  # noqa: E402
import nvfp4.torch as te  # noqa: E402
from nvfp4.torch import extras  # noqa: E402


def test_to_numpy_is_zero_copy():
    x = torch.randn(8, 64)
    assert np.shares_memory(extras.functional.to_numpy(x), x.numpy())
    xt = x.T  # strided views are read in place too
    assert np.shares_memory(extras.functional.to_numpy(xt), x.numpy())
    b = x.to(torch.bfloat16)
    bits = extras.functional.to_numpy(b)
    assert bits.dtype == np.uint16 and np.array_equal(bits, b.view(torch.int16).numpy().view(np.uint16))


@pytest.mark.parametrize("fmt", ["nvfp4_1x16", "nvfp4_16x16", "mxfp4", "mxfp8"])
def test_quantize_dequantize_gemm_equal_the_numpy_calls(fmt):
    torch.manual_seed(0)
    x, w = torch.randn(32, 128), torch.randn(48, 128)
    q = extras.functional.quantize(x, fmt)
    ref = nvfp4.quantize(x.numpy(), fmt)
    assert np.array_equal(q.data, ref.data) and np.array_equal(q.scales, ref.scales)
    d = extras.functional.dequantize(q)
    assert isinstance(d, torch.Tensor) and d.dtype == torch.float32 and np.array_equal(d.numpy(), nvfp4.dequantize(ref))
    if fmt != "mxfp8":
        wq = extras.functional.quantize(w, fmt)
        y = extras.functional.gemm(q, wq)
        assert y.shape == (32, 48) and np.array_equal(y.numpy(), nvfp4.gemm(ref, nvfp4.quantize(w.numpy(), fmt)))
        yb = extras.functional.gemm(q, wq, out_dtype="bfloat16")
        assert yb.dtype == torch.bfloat16 and torch.equal(yb, y.to(torch.bfloat16))


def test_bf16_tensors_quantize_as_their_values():
    x = torch.randn(16, 64).to(torch.bfloat16)
    assert np.array_equal(extras.functional.quantize(x).data, nvfp4.quantize(x.float().numpy()).data)


def test_fp8_calls():
    torch.manual_seed(1)
    x, w = torch.randn(16, 256), torch.randn(32, 256)
    xq, wq = extras.functional.quantize_fp8_current(x), extras.functional.quantize_fp8_blockwise(w, "e4m3", "128x128")
    assert np.array_equal(xq.codes, nvfp4.quantize_fp8_current(x.numpy()).codes)
    xb = extras.functional.quantize_fp8_blockwise(x)
    y = extras.functional.fp8_gemm(xb, wq, bias=torch.ones(32))
    assert np.array_equal(y.numpy(), nvfp4.fp8_gemm(nvfp4.quantize_fp8_blockwise(x.numpy()), wq, bias=np.ones(32, np.float32)))
