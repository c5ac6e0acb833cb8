"""What nvfp4.torch has beyond TransformerEngine's API, kept out of the TE namespace so that a script
written against ``nvfp4.torch`` ports back to TE by changing its import line only:

- ``optim``: AdamW and Muon with float32 / bfloat16 / FP8 optimizer state;
- ``functional``: the library's quantize / dequantize / GEMM calls on torch tensors.
"""
from . import functional, optim

__all__ = ["functional", "optim"]
