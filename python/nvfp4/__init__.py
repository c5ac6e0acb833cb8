"""nvfp4: NVIDIA's low-precision numerics (NVFP4, MXFP4 / MXFP8, FP8, TransformerEngine's recipes)
on the CPU, bit for bit with the GPU stack.

The compiled extension ``nvfp4._nvfp4`` holds every call (numpy arrays in and out); this package
re-exports its public names, listed below, so ``nvfp4.quantize``, ``nvfp4.Linear``, ... are the
extension's own; their types are in the committed stub ``nvfp4/_nvfp4.pyi``. ``nvfp4.torch``
(imported on demand, needs PyTorch) is TransformerEngine's PyTorch API: ``import nvfp4.torch as te``.
Reference: docs/python.md.
"""
from . import _nvfp4
from ._nvfp4 import (  # block-scaled formats: quantize, dequantize, codes
    QuantizedTensor, amax, compiled_isa, decode_e2m1, decode_e8m0, decode_ue4m3, dequantize, formats, quantize,
    quantize_rowwise_and_columnwise)
from ._nvfp4 import (  # the random Hadamard transform
    HadamardTransform, hadamard_rows, quantize_columnwise_rht, rht_columnwise)
from ._nvfp4 import (  # GEMMs: Blackwell's block-scaled MMA, Hopper's FP8
    block_scaled_mma, fp8_gemm, fp8_mma, gemm, gemm_alpha, mxfp8_gemm, mxfp8_mma)
from ._nvfp4 import (  # FP8 tensors and quantizers
    Fp8Tensor, quantize_fp8_blockwise, quantize_fp8_current, quantize_fp8_with_scale)
from ._nvfp4 import (  # error metrics
    ErrorReport, compare, max_abs_error, mse, sqnr_db)
from ._nvfp4 import (  # checkpoint files
    checkpoint_format, dequantize_checkpoint_tensor, describe_checkpoint_tensor, load_checkpoint, save_checkpoint)
from ._nvfp4 import (  # TE's recipes and the emulated Linear layer
    DelayedScaling, Float8BlockScaling, Float8CurrentScaling, Linear, LinearCore, MMParams, MXFP8BlockScaling,
    NVFP4BlockScaling, NoQuantization, QParams, SavedForward, recipe_name)
from ._nvfp4 import Error, __version__  # the library's error type (a ValueError with a code)

__doc__ = (__doc__ or "") + "\n" + (_nvfp4.__doc__ or "")

__all__ = [
    "QuantizedTensor", "amax", "compiled_isa", "decode_e2m1", "decode_e8m0", "decode_ue4m3", "dequantize", "formats", "quantize",
    "quantize_rowwise_and_columnwise",
    "HadamardTransform", "hadamard_rows", "quantize_columnwise_rht", "rht_columnwise",
    "block_scaled_mma", "fp8_gemm", "fp8_mma", "gemm", "gemm_alpha", "mxfp8_gemm", "mxfp8_mma",
    "Fp8Tensor", "quantize_fp8_blockwise", "quantize_fp8_current", "quantize_fp8_with_scale",
    "ErrorReport", "compare", "max_abs_error", "mse", "sqnr_db",
    "checkpoint_format", "dequantize_checkpoint_tensor", "describe_checkpoint_tensor", "load_checkpoint", "save_checkpoint",
    "DelayedScaling", "Float8BlockScaling", "Float8CurrentScaling", "Linear", "LinearCore", "MMParams", "MXFP8BlockScaling",
    "NVFP4BlockScaling", "NoQuantization", "QParams", "SavedForward", "recipe_name",
    "Error", "__version__",
]
