"""The identities TE gives its quantizer slots and the requests a CustomRecipe factory may return
(TE: transformer_engine/pytorch/quantization.py QuantizerRole, QuantizerRequest,
DelayedScalingRequest); re-exported by nvfp4.torch at TE's names."""
from __future__ import annotations

import dataclasses
from typing import Any, List, Optional

from ..common.recipe import Format

__all__ = ["QuantizerRole", "QuantizerRequest", "DelayedScalingRequest", "linear_roles"]


@dataclasses.dataclass(frozen=True)
class QuantizerRole:
    """Which tensor a quantizer slot is for: module_type ("linear", "grouped_linear", ...), tensor_type
    ("input", "weight", "grad_output", ...), the module's name; "" where unknown."""
    module_type: str = ""
    tensor_type: str = ""
    name: str = ""

    def __str__(self) -> str:
        parts = [f"{field}={getattr(self, field)}" for field in ("module_type", "tensor_type", "name") if getattr(self, field)]
        return "|".join(parts) if parts else "QuantizerRole()"


@dataclasses.dataclass(frozen=True)
class QuantizerRequest:
    """A factory's request for a quantizer whose state TE keeps (base class)."""


@dataclasses.dataclass(frozen=True)
class DelayedScalingRequest(QuantizerRequest):
    """A delayed-scaling quantizer with the module's scale and amax history (TE's defaults)."""
    fp8_format: Format = Format.HYBRID
    margin: int = 0
    amax_history_len: int = 1024
    amax_compute_algo: Any = "max"
    scaling_factor_compute_algo: Optional[Any] = None
    reduce_amax: bool = True


def linear_roles(name: str = "", module_type: str = "linear") -> List[Optional[QuantizerRole]]:
    """TE's slots of one GEMM module (module/linear.py get_quantizer_roles): forward input, weight,
    output (None: its consumer is unknown), backward grad_output, grad_input (None)."""
    return [QuantizerRole(module_type, "input", name), QuantizerRole(module_type, "weight", name), None,
            QuantizerRole(module_type, "grad_output", name), None]
