"""TransformerEngine's recipes (``transformer_engine.common.recipe``) with TE's class names, field
names and defaults, as plain Python objects; ``to_library`` maps one onto the library's recipe
object (``nvfp4.DelayedScaling``, ...). A field the library cannot honour raises ValueError when
the recipe is used, naming the field; fields that only steer GPU-side machinery (attention,
amax reduction across processes) are accepted and have no effect here (docs/python.md lists them).

What TE's ``__post_init__`` rejects (pure E5M2, 2-D x 2-D block GEMMs, ...) raises ValueError here
at construction, where TE raises AssertionError.

The per-role quantizer parameters are what TE's modules read, so they are what ``to_library`` reads:
``fp8_quant_fwd_inp`` / ``fp8_quant_fwd_weight`` / ``fp8_quant_bwd_grad`` (Float8CurrentScaling,
Float8BlockScaling) and ``fp4_quant_*`` (NVFP4BlockScaling) are instance attributes, not constructor
arguments (TE: class attributes and ``__post_init__`` assignments), and assigning one after
construction takes effect at the next use, or raises there when the library cannot honour it.
"""
from __future__ import annotations

import dataclasses
import enum
import os
from typing import Any, Callable, Hashable, NamedTuple, Optional, Tuple, Union

import nvfp4 as _lib

__all__ = ["Format", "MMParams", "QParams", "Recipe", "DelayedScaling", "Float8CurrentScaling",
           "Float8BlockScaling", "MXFP8BlockScaling", "NVFP4BlockScaling", "CustomRecipe", "to_library", "recipe_key"]


class _FormatHelper(NamedTuple):
    max_fwd: float
    max_bwd: float


class Format(enum.Enum):
    """FP8 / FP4 formats: E4M3 and E5M2 everywhere, HYBRID = E4M3 forward, E5M2 backward."""
    E2M1 = _FormatHelper(max_fwd=6, max_bwd=6)
    E4M3 = _FormatHelper(max_fwd=448, max_bwd=448)
    E5M2 = _FormatHelper(max_fwd=57344, max_bwd=57344)
    HYBRID = _FormatHelper(max_fwd=448, max_bwd=57344)


@dataclasses.dataclass(frozen=True)
class MMParams:
    """GEMM options: use_split_accumulator=False is Hopper's FP8 fast accumulation."""
    use_split_accumulator: bool = True


@dataclasses.dataclass(frozen=True)
class QParams:
    """Quantizer options of one tensor role."""
    power_2_scale: bool = False
    amax_epsilon: float = 0.0
    random_hadamard_transform: bool = False
    stochastic_rounding: bool = False
    fp4_2d_quantization: bool = False


def _env_flag(name):
    return os.getenv(name, "0") == "1"


def _reject(condition, message):
    if condition:
        raise ValueError(message)


def _check_format(recipe, allowed=(Format.E4M3, Format.HYBRID)):
    _reject(not isinstance(recipe.fp8_format, Format),
            f"{type(recipe).__name__}.fp8_format must be a recipe.Format, got {recipe.fp8_format!r}")
    _reject(recipe.fp8_format == Format.E5M2, "Pure E5M2 training is not supported (use Format.HYBRID: E4M3 forward, E5M2 backward)")
    _reject(recipe.fp8_format not in allowed,
            f"{type(recipe).__name__}.fp8_format must be one of {[f.name for f in allowed]}, got {recipe.fp8_format.name}")


def _check_backward_override(recipe):
    _reject(recipe.backward_override not in (None, "high_precision", "dequantized"),
            "backward_override (NVTE_BACKWARD_OVERRIDE) must be None, 'high_precision' or 'dequantized'")


_FP8_ROLES = ("fp8_quant_fwd_inp", "fp8_quant_fwd_weight", "fp8_quant_bwd_grad")
_FP4_ROLES = ("fp4_quant_fwd_inp", "fp4_quant_fwd_weight", "fp4_quant_bwd_grad")


# The library's delayed_scaling::max_amax_history_len (recipes/delayed_scaling.hpp): TE has no bound
# and allocates [len, n] float32 on the GPU when a region first uses the recipe (10**9: 12 GB per layer).
_MAX_AMAX_HISTORY_LEN = 1 << 20


def _check_amax_history_len(length):
    """Refused at construction, before any layer allocates a history (issue 39 item 9)."""
    if isinstance(length, bool) or not hasattr(type(length), "__index__"):
        raise TypeError(f"DelayedScaling.amax_history_len must be an int, got {type(length).__name__} {length!r}")
    _reject(not 1 <= length.__index__() <= _MAX_AMAX_HISTORY_LEN,
            f"DelayedScaling.amax_history_len must be in [1, {_MAX_AMAX_HISTORY_LEN}] (the window each scale update scans), got {length}")


class Recipe:
    """Base class of the recipes (TE's ``Recipe``), with TE's classification helpers."""

    @classmethod
    def nvfp4(cls) -> bool:
        return issubclass(cls, NVFP4BlockScaling)

    @classmethod
    def mxfp8(cls) -> bool:
        return issubclass(cls, MXFP8BlockScaling)

    @classmethod
    def delayed(cls) -> bool:
        return issubclass(cls, DelayedScaling)

    @classmethod
    def float8_current_scaling(cls) -> bool:
        return issubclass(cls, Float8CurrentScaling)

    @classmethod
    def float8_per_tensor_scaling(cls) -> bool:
        return issubclass(cls, (DelayedScaling, Float8CurrentScaling))

    @classmethod
    def float8_block_scaling(cls) -> bool:
        return issubclass(cls, Float8BlockScaling)

    @classmethod
    def custom(cls) -> bool:
        return issubclass(cls, CustomRecipe)


@dataclasses.dataclass
class DelayedScaling(Recipe):
    """Per-tensor FP8 scales from the amax history of earlier steps: scale = (fp8_max / amax) / 2^margin."""
    margin: int = 0
    fp8_format: Format = Format.HYBRID
    amax_history_len: int = 1024
    amax_compute_algo: Union[str, Callable] = "max"
    scaling_factor_compute_algo: Optional[Callable] = None
    reduce_amax: bool = True
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = dataclasses.field(default_factory=lambda: os.getenv("NVTE_BACKWARD_OVERRIDE", None))

    def __post_init__(self) -> None:
        _check_format(self)
        _check_backward_override(self)
        _reject(self.backward_override is not None, "Delayed scaling only supports backward_override=None.")
        _check_amax_history_len(self.amax_history_len)


@dataclasses.dataclass
class Float8CurrentScaling(Recipe):
    """Per-tensor FP8 scales from each tensor's own amax: scale = fp8_max / amax."""
    use_power_2_scales: bool = dataclasses.field(default_factory=lambda: _env_flag("NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES"))
    fp8_format: Format = Format.HYBRID
    fp8_gemm_fprop: MMParams = MMParams(use_split_accumulator=False)
    fp8_gemm_dgrad: MMParams = MMParams(use_split_accumulator=True)
    fp8_gemm_wgrad: MMParams = MMParams(use_split_accumulator=True)
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = dataclasses.field(default_factory=lambda: os.getenv("NVTE_BACKWARD_OVERRIDE", None))

    def __post_init__(self) -> None:
        # TE: class attributes built from the environment's default of use_power_2_scales, not from
        # the constructor argument; TE's GEMM modules read these (not use_power_2_scales).
        power_2 = _env_flag("NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES")
        for name in _FP8_ROLES:
            setattr(self, name, QParams(power_2_scale=power_2, amax_epsilon=0.0))
        _check_format(self)
        _check_backward_override(self)


@dataclasses.dataclass
class MXFP8BlockScaling(Recipe):
    """MXFP8: blocks of 32 with E8M0 (power-of-two) scales, rowwise and columnwise copies."""
    margin: int = 0
    fp8_format: Format = Format.E4M3
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = dataclasses.field(default_factory=lambda: os.getenv("NVTE_BACKWARD_OVERRIDE", None))
    enable_2d_quantization: bool = False  # weights in 32x32 blocks (TE: Linear / GroupedLinear weights only)

    def __post_init__(self) -> None:
        _check_format(self)
        _check_backward_override(self)


@dataclasses.dataclass
class Float8BlockScaling(Recipe):
    """FP8 with 1x128 (1-D) or 128x128 (2-D) blocks, each scaled by its own amax (DeepSeek-V3 style)."""
    use_f32_scales: bool = dataclasses.field(default_factory=lambda: _env_flag("NVTE_FP8_BLOCK_SCALING_FP32_SCALES"))
    fp8_format: Format = Format.E4M3
    x_block_scaling_dim: int = 1
    w_block_scaling_dim: int = 2
    grad_block_scaling_dim: int = 1
    fp8_gemm_fprop: MMParams = MMParams(use_split_accumulator=True)
    fp8_gemm_dgrad: MMParams = MMParams(use_split_accumulator=True)
    fp8_gemm_wgrad: MMParams = MMParams(use_split_accumulator=True)
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = dataclasses.field(default_factory=lambda: os.getenv("NVTE_BACKWARD_OVERRIDE", None))

    def __post_init__(self) -> None:
        # TE: class attributes built from the environment's default of use_f32_scales (not the
        # constructor argument); TE's quantizers read these.
        power_2 = not _env_flag("NVTE_FP8_BLOCK_SCALING_FP32_SCALES")
        for name in _FP8_ROLES:
            setattr(self, name, QParams(power_2_scale=power_2, amax_epsilon=0.0))
        for dim in ("x", "w", "grad"):
            _reject(getattr(self, f"{dim}_block_scaling_dim") not in (1, 2), f"Only 1D or 2D blocks supported for {dim}")
        dims = (self.x_block_scaling_dim, self.w_block_scaling_dim, self.grad_block_scaling_dim)
        _reject(sum(d == 2 for d in dims) > 1, "2D by 2D block gemm not supported.")
        for gemm in ("fprop", "dgrad", "wgrad"):
            _reject(not getattr(self, f"fp8_gemm_{gemm}").use_split_accumulator, f"Split accumulator required for {gemm}.")
        _reject(self.fp8_dpa or self.fp8_mha, "FP8 attention is not supported for Float8BlockScaling.")
        _check_format(self)
        _check_backward_override(self)


@dataclasses.dataclass
class CustomRecipe(Recipe):
    """TE's recipe of user quantizer factories: ``qfactory(role)`` returns a quantizer (or a
    ``DelayedScalingRequest``) for each tensor role. nvfp4.torch runs it when every role's quantizer
    is of one built-in recipe's kind (nvfp4.torch.tensor.resolve_custom_recipe); a mix raises."""
    qfactory: Callable[..., Any]
    fp8_format: Format = Format.HYBRID
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = dataclasses.field(default_factory=lambda: os.getenv("NVTE_BACKWARD_OVERRIDE", None))
    quantization_alignment: int = 128

    def __post_init__(self) -> None:
        _check_backward_override(self)
        if self.quantization_alignment <= 0:
            raise ValueError("CustomRecipe quantization_alignment must be positive.")


_FOUR_OVER_SIX_SCOPES = ("none", "weights", "activations", "all")


@dataclasses.dataclass
class NVFP4BlockScaling(Recipe):
    """NVFP4: E2M1 elements, E4M3 scales per 16 (16x16 tiles for weights), an FP32 tensor scale;
    the RHT on the wgrad operands and stochastic rounding of gradients."""
    disable_rht: bool = dataclasses.field(default_factory=lambda: _env_flag("NVTE_NVFP4_DISABLE_RHT"))
    disable_stochastic_rounding: bool = dataclasses.field(default_factory=lambda: _env_flag("NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING"))
    disable_2d_quantization: bool = dataclasses.field(default_factory=lambda: _env_flag("NVTE_NVFP4_DISABLE_2D_QUANTIZATION"))
    row_scaled_activation: bool = dataclasses.field(default_factory=lambda: _env_flag("NVTE_NVFP4_ROW_SCALED_ACTIVATION"))
    nvfp4_4over6: str = dataclasses.field(default_factory=lambda: os.getenv("NVTE_NVFP4_4OVER6", "none"))
    nvfp4_4over6_e4m3_use_256: str = dataclasses.field(default_factory=lambda: os.getenv("NVTE_NVFP4_4OVER6_E4M3_USE_256", "all"))
    nvfp4_4over6_err_mode: str = dataclasses.field(default_factory=lambda: os.getenv("NVTE_NVFP4_4OVER6_ERR_MODE", "MAE").upper())
    fp4_format: Format = Format.E2M1
    fp8_format: Format = Format.E4M3
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = dataclasses.field(default_factory=lambda: os.getenv("NVTE_BACKWARD_OVERRIDE", None))

    def __post_init__(self) -> None:
        _reject(self.fp4_format != Format.E2M1, "Only E2M1 is supported for NVFP4 scaling")
        _reject(self.fp8_format != Format.E4M3, "Only E4M3 is supported for NVFP4 scaling")
        _check_backward_override(self)
        _reject(self.nvfp4_4over6 not in _FOUR_OVER_SIX_SCOPES, f"nvfp4_4over6 must be one of {_FOUR_OVER_SIX_SCOPES}")
        _reject(self.nvfp4_4over6_e4m3_use_256 not in _FOUR_OVER_SIX_SCOPES,
                f"nvfp4_4over6_e4m3_use_256 must be one of {_FOUR_OVER_SIX_SCOPES}")
        _reject(self.nvfp4_4over6_err_mode not in ("MAE", "MSE"), "nvfp4_4over6_err_mode must be 'MAE' or 'MSE'")
        # TE derives the per-role quantizer parameters from the switches (RHT only on columnwise copies).
        self.fp4_quant_fwd_inp = QParams(random_hadamard_transform=not self.disable_rht)
        self.fp4_quant_fwd_weight = QParams(fp4_2d_quantization=not self.disable_2d_quantization)
        self.fp4_quant_bwd_grad = QParams(random_hadamard_transform=not self.disable_rht,
                                          stochastic_rounding=not self.disable_stochastic_rounding)


# ---- onto the library's recipe objects ------------------------------------------------------------

_FORMAT_NAMES = {Format.E4M3: "e4m3", Format.HYBRID: "hybrid"}


def _assign(target, name, value, recipe_name, default=None):
    """Sets target.name = value when the library has the field; without it, a value other than
    TE's default cannot be honoured and raises."""
    if hasattr(target, name):
        try:
            setattr(target, name, value)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{recipe_name}.{name}={value!r} cannot be honoured by this library: {e}") from None
    elif value != default:
        raise ValueError(f"{recipe_name}.{name}={value!r} is not supported by this library (only TE's default {default!r}); "
                         f"see docs/python.md, 'From PyTorch'")


def _te_int_flag(name, default):
    """An integer environment flag read as TE reads it (bool(int(os.getenv(name, default))))."""
    text = os.getenv(name, str(default))
    try:
        return bool(int(text))
    except ValueError:
        raise ValueError(f"environment variable {name}={text!r} must be an integer (0 or 1), as TransformerEngine reads it") from None


def _require_default(recipe, name, default):
    value = getattr(recipe, name)
    if value != default:
        raise ValueError(f"{type(recipe).__name__}.{name}={value!r} is not supported by this library (only {default!r})")


def to_library(recipe: Optional[Recipe]) -> Union[_lib.NoQuantization, _lib.DelayedScaling, _lib.Float8CurrentScaling,
                                                   _lib.Float8BlockScaling, _lib.MXFP8BlockScaling, _lib.NVFP4BlockScaling]:
    """The library's recipe object for a TE recipe (None: nvfp4.NoQuantization()). Raises
    ValueError for a field it cannot honour, TypeError for an object that is no recipe."""
    if recipe is None:
        return _lib.NoQuantization()
    name = type(recipe).__name__
    if not isinstance(recipe, Recipe):
        raise TypeError(f"expected a recipe from nvfp4.common.recipe (DelayedScaling, Float8CurrentScaling, Float8BlockScaling, "
                        f"MXFP8BlockScaling, NVFP4BlockScaling), got {type(recipe).__module__}.{name}")
    if recipe.backward_override is not None:
        raise ValueError(f"{name}.backward_override={recipe.backward_override!r} is not supported by this library (only None)")
    if isinstance(recipe, DelayedScaling):
        out = _lib.DelayedScaling()
        if callable(recipe.amax_compute_algo):
            raise ValueError("DelayedScaling.amax_compute_algo: a callable is not supported here, only 'max' or 'most_recent'")
        if recipe.amax_compute_algo not in ("max", "most_recent"):
            raise ValueError(f"DelayedScaling.amax_compute_algo must be 'max' or 'most_recent', got {recipe.amax_compute_algo!r}")
        if recipe.scaling_factor_compute_algo is not None:
            raise ValueError("DelayedScaling.scaling_factor_compute_algo is not supported here (only None: TE's formula)")
        margin = recipe.margin
        if isinstance(margin, float) and margin.is_integer():
            margin = int(margin)
        _assign(out, "margin", margin, name, 0)
        _assign(out, "amax_history_len", int(recipe.amax_history_len), name, 1024)
        out.amax_compute_algo = recipe.amax_compute_algo
        out.fp8_format = _FORMAT_NAMES[recipe.fp8_format]
        if hasattr(out, "reduce_amax"):
            out.reduce_amax = bool(recipe.reduce_amax)
        if _te_int_flag("NVTE_UNFUSED_FP8_UPDATE", 0):
            # TE's Python update (quantization.py reduce_and_update_fp8_tensors) instead of its fused
            # kernel; its scale function is compiled by torch.compile unless NVTE_TORCH_COMPILE=0
            # (pytorch/jit.py jit_fuser). The compiled form is reproduced as an H100 computes it.
            out.unfused_update = True
            out.unfused_form = "torch_compile_h100" if _te_int_flag("NVTE_TORCH_COMPILE", 1) else "torch_eager"
    elif isinstance(recipe, Float8CurrentScaling):
        out = _lib.Float8CurrentScaling()
        out.fp8_format = _FORMAT_NAMES[recipe.fp8_format]
        # TE's GEMM modules set each quantizer's power-of-two rule and amax epsilon from the role's
        # QParams (module/linear.py _customize_quantizers_float8_current_scaling), not from
        # use_power_2_scales; the library has one rule for all roles and no epsilon.
        roles = [_qparams(recipe, role) for role in _FP8_ROLES]
        if len({q.power_2_scale for q in roles}) != 1:
            raise ValueError(f"{name}: the roles' QParams.power_2_scale differ ({[q.power_2_scale for q in roles]} for "
                             f"{list(_FP8_ROLES)}); this library applies one power-of-two rule to every role")
        for role, q in zip(_FP8_ROLES, roles):
            if q.amax_epsilon != 0.0:
                raise ValueError(f"{name}.{role}.amax_epsilon={q.amax_epsilon!r} is not supported by this library (only 0.0)")
        out.use_power_2_scales = bool(roles[0].power_2_scale)
        for gemm, default in (("fprop", False), ("dgrad", True), ("wgrad", True)):
            params = getattr(recipe, f"fp8_gemm_{gemm}")
            if hasattr(out, f"fp8_gemm_{gemm}"):
                _set_mm(out, gemm, params)
            elif params.use_split_accumulator != default:
                raise ValueError(f"{name}.fp8_gemm_{gemm}={params!r} is not supported by this library (only TE's default)")
    elif isinstance(recipe, Float8BlockScaling):
        out = _lib.Float8BlockScaling()
        out.fp8_format = _FORMAT_NAMES[recipe.fp8_format]
        out.x_block_scaling_dim = recipe.x_block_scaling_dim
        out.w_block_scaling_dim = recipe.w_block_scaling_dim
        out.grad_block_scaling_dim = recipe.grad_block_scaling_dim
        for role in ("fwd_inp", "fwd_weight", "bwd_grad"):
            q = _qparams(recipe, f"fp8_quant_{role}")
            if hasattr(out, f"fp8_quant_{role}"):
                setattr(out, f"fp8_quant_{role}", _lib.QParams(q.power_2_scale, q.amax_epsilon))
            elif (q.power_2_scale, q.amax_epsilon) != (True, 0.0):
                raise ValueError(f"{name}.fp8_quant_{role}={q!r} is not supported by this library "
                                 "(only power-of-two scales with amax_epsilon 0, TE's default)")
    elif isinstance(recipe, MXFP8BlockScaling):
        out = _lib.MXFP8BlockScaling()
        out.fp8_format = _FORMAT_NAMES[recipe.fp8_format]
        _assign(out, "margin", recipe.margin, name, 0)
        _assign(out, "enable_2d_quantization", bool(getattr(recipe, "enable_2d_quantization", False)), name, False)
    elif isinstance(recipe, NVFP4BlockScaling):
        out = _lib.NVFP4BlockScaling()
        switches = _nvfp4_switches(recipe, name)
        out.disable_rht, out.disable_stochastic_rounding, out.disable_2d_quantization = switches
        out.row_scaled_activation = bool(recipe.row_scaled_activation)
        out.nvfp4_4over6 = recipe.nvfp4_4over6
        out.nvfp4_4over6_e4m3_use_256 = recipe.nvfp4_4over6_e4m3_use_256
        out.nvfp4_4over6_err_mode = recipe.nvfp4_4over6_err_mode.lower()
    elif isinstance(recipe, CustomRecipe):
        raise ValueError("CustomRecipe: its quantizers are chosen per module and role; nvfp4.torch resolves it "
                         "(nvfp4.torch.tensor.resolve_custom_recipe) before the library runs it")
    else:
        raise TypeError(f"{name} is not a recipe this library emulates")
    out.validate()
    return out


def _qparams(recipe, role):
    q = getattr(recipe, role, None)
    if not isinstance(q, QParams):
        raise TypeError(f"{type(recipe).__name__}.{role} must be a recipe.QParams, got {type(q).__name__}")
    return q


def _nvfp4_switches(recipe, name):
    """(disable_rht, disable_stochastic_rounding, disable_2d_quantization) from the per-role QParams
    TE's NVFP4 quantizers are built from (pytorch/quantization.py NVFP4BlockScalingRecipeState): the
    RHT on the wgrad GEMM's operands (X's and dY's columnwise copies, so both or neither),
    stochastic rounding of the gradient, 16x16 tiles for the weight. Other combinations raise."""
    inp, weight, grad = (_qparams(recipe, role) for role in _FP4_ROLES)
    four_over_six = {"fp4_quant_fwd_inp": recipe.nvfp4_4over6 in ("all", "activations"),
                     "fp4_quant_fwd_weight": recipe.nvfp4_4over6 in ("all", "weights")}
    for role, q in (("fp4_quant_fwd_inp", inp), ("fp4_quant_fwd_weight", weight)):
        if four_over_six[role] and q.random_hadamard_transform:
            raise ValueError("NVFP4 4over6 quantization does not support RHT.")
        if four_over_six[role] and q.stochastic_rounding:
            raise ValueError("NVFP4 4over6 quantization does not support stochastic rounding.")

    def refuse(what):
        raise ValueError(f"{name}: {what} is not supported by this library (fp4_quant_fwd_inp={inp!r}, "
                         f"fp4_quant_fwd_weight={weight!r}, fp4_quant_bwd_grad={grad!r})")

    if inp.random_hadamard_transform != grad.random_hadamard_transform:
        refuse("the RHT on only one of the wgrad GEMM's operands (fp4_quant_fwd_inp and fp4_quant_bwd_grad differ)")
    if weight.random_hadamard_transform:
        refuse("the RHT on the weight")
    if inp.stochastic_rounding or weight.stochastic_rounding:
        refuse("stochastic rounding of the input or the weight")
    if inp.fp4_2d_quantization or grad.fp4_2d_quantization:
        refuse("16x16 (2D) quantization of the input or the gradient")
    return not grad.random_hadamard_transform, not grad.stochastic_rounding, not weight.fp4_2d_quantization


def recipe_key(recipe: Optional[Recipe]) -> Optional[Tuple[str, Hashable]]:
    """What the library runs for `recipe`, as a hashable value: two recipes with equal keys run the
    same (class, fields, and the per-role QParams assigned after construction). A CustomRecipe is
    keyed by identity (its factory may be stateful), as TE keeps a custom recipe's state."""
    if recipe is None:
        return None
    if isinstance(recipe, CustomRecipe):
        return ("CustomRecipe", id(recipe))
    items = tuple(sorted((k, repr(v)) for k, v in vars(recipe).items()))
    return (type(recipe).__name__, items)


def _set_mm(out, gemm, params):
    value = getattr(out, f"fp8_gemm_{gemm}")
    if hasattr(value, "use_split_accumulator"):
        value.use_split_accumulator = bool(params.use_split_accumulator)
        setattr(out, f"fp8_gemm_{gemm}", value)
    else:
        setattr(out, f"fp8_gemm_{gemm}", bool(params.use_split_accumulator))
