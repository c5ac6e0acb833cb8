"""nvfp4: NVIDIA's low-precision numerics (NVFP4, MXFP4 / MXFP8, FP8, TransformerEngine's recipes)
on the CPU, bit for bit with the GPU stack.

The compiled extension ``nvfp4._nvfp4`` holds every call (numpy arrays in and out); this package
re-exports its names, so ``nvfp4.quantize``, ``nvfp4.Linear``, ... are the extension's own.
``nvfp4.torch`` (imported on demand, needs PyTorch) is TransformerEngine's PyTorch API:
``import nvfp4.torch as te``. Reference: docs/python.md.
"""
from . import _nvfp4
from ._nvfp4 import *  # noqa: F401,F403  (the extension's public names)
from ._nvfp4 import __version__, compiled_isa, formats  # noqa: F401

__doc__ = (__doc__ or "") + "\n" + (_nvfp4.__doc__ or "")
__all__ = sorted(name for name in dir(_nvfp4) if not name.startswith("_")) + ["__version__"]
