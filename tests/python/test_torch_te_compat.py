# nvfp4.torch behaves as TransformerEngine's PyTorch API does (TE's source named at each test):
# what TE's recipes read, TE's norms, DType, and what TE refuses, refused with TE's message.
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as R  # noqa: E402


# ---- recipes: what TE's modules read (pytorch/quantization.py, module/linear.py) -----------------

def test_current_scaling_reads_the_roles_qparams_not_use_power_2_scales(monkeypatch):
    monkeypatch.delenv("NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES", raising=False)
    # TE's Linear sets each quantizer's power-of-two rule from the role's QParams
    # (_customize_quantizers_float8_current_scaling); use_power_2_scales does not reach them.
    assert R.to_library(R.Float8CurrentScaling(use_power_2_scales=True)).use_power_2_scales is False
    r = R.Float8CurrentScaling()
    for role in ("fp8_quant_fwd_inp", "fp8_quant_fwd_weight", "fp8_quant_bwd_grad"):
        setattr(r, role, R.QParams(power_2_scale=True))
    assert R.to_library(r).use_power_2_scales is True
    r.fp8_quant_bwd_grad = R.QParams(power_2_scale=False)
    with pytest.raises(ValueError, match="power_2_scale differ"):
        R.to_library(r)
    r = R.Float8CurrentScaling()
    r.fp8_quant_fwd_weight = R.QParams(amax_epsilon=1e-3)
    with pytest.raises(ValueError, match="amax_epsilon"):
        R.to_library(r)
    with pytest.raises(TypeError):  # TE: class attributes, not constructor arguments
        R.Float8CurrentScaling(fp8_quant_fwd_inp=R.QParams())
    monkeypatch.setenv("NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES", "1")
    assert R.Float8CurrentScaling().fp8_quant_fwd_inp.power_2_scale is True


def test_nvfp4_reads_the_roles_qparams_assigned_after_construction():
    r = R.NVFP4BlockScaling()
    lib = R.to_library(r)
    assert (lib.disable_rht, lib.disable_stochastic_rounding, lib.disable_2d_quantization) == (False, False, False)
    r.fp4_quant_fwd_inp = R.QParams()  # as TE's tests do (tests/pytorch/test_sanity.py nvfp4_row_scaled)
    r.fp4_quant_fwd_weight = R.QParams()
    r.fp4_quant_bwd_grad = R.QParams()
    lib = R.to_library(r)
    assert (lib.disable_rht, lib.disable_stochastic_rounding, lib.disable_2d_quantization) == (True, True, True)
    # The switches only build the QParams in __post_init__: TE ignores them afterwards, and so does this.
    r2 = R.NVFP4BlockScaling()
    r2.disable_rht = True
    assert R.to_library(r2).disable_rht is False
    # What the library cannot run raises, naming the roles.
    r3 = R.NVFP4BlockScaling()
    r3.fp4_quant_fwd_inp = R.QParams()
    with pytest.raises(ValueError, match="RHT on only one"):
        R.to_library(r3)
    r4 = R.NVFP4BlockScaling(disable_rht=True, nvfp4_4over6="weights")
    r4.fp4_quant_fwd_weight = R.QParams(stochastic_rounding=True)
    with pytest.raises(ValueError, match="^NVFP4 4over6 quantization does not support stochastic rounding.$"):
        R.to_library(r4)


def test_recipe_key_sees_roles_assigned_after_construction():
    r = R.NVFP4BlockScaling()
    before = R.recipe_key(r)
    assert R.recipe_key(R.NVFP4BlockScaling()) == before
    r.fp4_quant_fwd_weight = R.QParams()
    assert R.recipe_key(r) != before


def test_mxfp8_2d_weights_and_custom_recipe_fields():
    assert R.MXFP8BlockScaling().enable_2d_quantization is False
    assert R.to_library(R.MXFP8BlockScaling()).enable_2d_quantization is False
    # TE's 32x32 weight blocks reach the library, which says it does not emulate them yet.
    with pytest.raises(ValueError, match="enable_2d_quantization"):
        R.to_library(R.MXFP8BlockScaling(enable_2d_quantization=True))
    custom = R.CustomRecipe(qfactory=lambda role: None)
    assert custom.custom() and not R.DelayedScaling.custom()
    assert (custom.fp8_format, custom.quantization_alignment) == (R.Format.HYBRID, 128)
    with pytest.raises(ValueError, match="quantization_alignment must be positive"):
        R.CustomRecipe(qfactory=lambda role: None, quantization_alignment=0)
    with pytest.raises(TypeError):
        R.CustomRecipe()  # qfactory is required, as in TE


def test_dtype_has_te_values():
    # transformer_engine/common/include/transformer_engine/transformer_engine.h, enum class DType.
    expected = {"kByte": 0, "kInt32": 2, "kFloat32": 4, "kFloat16": 5, "kBFloat16": 6, "kFloat8E4M3": 7,
                "kFloat8E5M2": 8, "kFloat4E2M1": 10}
    assert {m.name: int(m) for m in te.DType} == expected
    from nvfp4.torch.constants import TE_DType
    assert TE_DType[torch.bfloat16] is te.DType.kBFloat16 and te.DType.cast(7) is te.DType.kFloat8E4M3


# ---- norms (TE module/layernorm.py, ops/basic/layer_norm.py) -------------------------------------

def test_norms_take_normalized_shape_and_tuples():
    x = torch.randn(3, 4, 8)
    ln = te.LayerNorm(normalized_shape=(4, 8), eps=1e-6)
    assert ln.weight.shape == (4, 8) and ln.bias.shape == (4, 8)
    assert torch.equal(ln(x), torch.nn.functional.layer_norm(x, (4, 8), eps=1e-6))
    rms = te.RMSNorm([4, 8])
    expected = x * torch.rsqrt(x.pow(2).mean(dim=(-2, -1), keepdim=True) + 1e-5)
    assert torch.equal(rms(x), expected)
    with pytest.raises(ValueError, match=r"^Input tensor \(shape=\(3, 8, 4\)\) and weight tensor \(shape=\(4, 8\)\) are not compatible$"):
        ln(torch.randn(3, 8, 4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert te.LayerNorm(hidden_size=8).normalized_shape == (8,)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    with pytest.raises(RuntimeError, match="Neither `normalized_shape` nor `hidden_size`"):
        te.RMSNorm()
    with pytest.raises(RuntimeError, match="Both `normalized_shape` and `hidden_size`"):
        te.LayerNorm(8, hidden_size=8)
    with pytest.raises(RuntimeError, match="Both `dtype` and `params_dtype`"):
        te.LayerNorm(8, params_dtype=torch.float32, dtype=torch.float32)
    assert te.LayerNorm(8, sequence_parallel=True).weight.sequence_parallel is True  # Megatron's flag, as TE sets it


def test_norms_compute_in_the_weight_dtype_as_te():
    # TE's op casts the input to its weight's dtype (or torch autocast's) and returns that dtype.
    x = torch.randn(2, 16).to(torch.bfloat16)
    ln = te.LayerNorm(16)
    y = ln(x)
    assert y.dtype == torch.float32
    assert torch.equal(y, torch.nn.functional.layer_norm(x.float(), (16,)))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert ln(torch.randn(2, 16)).dtype == torch.bfloat16
    half = te.RMSNorm(16, params_dtype=torch.float16)
    xh = torch.randn(2, 16).half()
    x32 = xh.float()
    assert torch.equal(half(xh), (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).half())


def test_norms_on_the_meta_device_initialise_later():
    ln = te.LayerNorm(16, device="meta", zero_centered_gamma=True)
    assert ln.weight.device.type == "meta"
    ln.reset_parameters()
    assert ln.weight.device.type == "cpu" and torch.equal(ln.weight, torch.zeros(16))
    assert isinstance(ln.weight, torch.nn.Parameter) and [n for n, _ in ln.named_parameters()] == ["weight", "bias"]
    lazy = te.RMSNorm(16, device="meta")
    assert lazy(torch.ones(2, 16)).shape == (2, 16) and lazy.weight.device.type == "cpu"  # TE's op: first forward
    with pytest.raises(ValueError, match="device='cpu'"):
        te.LayerNorm(16, device="cuda")
