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


# ---- quantizers and quantized tensors (TE pytorch/quantized_tensor.py, tensor/*) -------------------

def e4m3_value(code):
    """An E4M3 code's value by the format's definition (bias 7, 3 mantissa bits, no infinities)."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0:
        return sign * mantissa / 8 * 2.0 ** -6
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)


def test_float8_quantizer_uses_its_scale_and_max_merges_the_amax():
    from nvfp4.torch.tensor import Float8Quantizer, Float8Tensor
    scale, amax = torch.tensor([4.0]), torch.tensor([10.0])
    x = torch.linspace(-3, 3, 64).reshape(4, 16)
    q = Float8Quantizer(scale, amax, te.DType.kFloat8E4M3)(x)
    assert isinstance(q, Float8Tensor) and q.dtype == torch.float32 and q.shape == (4, 16)
    assert amax.item() == 10.0  # 3 < 10: the larger amax stays
    Float8Quantizer(scale, amax, te.DType.kFloat8E4M3)(x * 5)
    assert amax.item() == 15.0
    assert q._scale_inv.item() == 0.25
    decoded = torch.tensor([[e4m3_value(int(c)) for c in row] for row in q._data.tolist()]) * 0.25
    assert torch.equal(q.dequantize(), decoded)
    scaled = x * 4  # |x * 4| <= 12: every value within half an E4M3 step of its code
    half_step = 2.0 ** (torch.floor(torch.log2(scaled.abs().clamp(min=2.0 ** -6))) - 4)
    assert ((decoded * 4 - scaled).abs() <= half_step).all()


def test_quantized_tensors_stand_for_their_values_in_torch():
    from nvfp4.torch.tensor import Float8CurrentScalingQuantizer, MXFP8Quantizer, NVFP4Quantizer, QuantizedTensor
    torch.manual_seed(0)
    x = torch.randn(32, 64)
    quantizer = Float8CurrentScalingQuantizer(te.DType.kFloat8E4M3, "cpu")
    p = torch.nn.Parameter(quantizer(x))
    assert isinstance(p, QuantizedTensor) and isinstance(p, torch.nn.Parameter) and p.requires_grad
    values = p.dequantize()
    assert (values - x).abs().max() <= x.abs().max() / 448 * 16  # half of E4M3's largest step (32 at 448)
    assert type(p * 2) is torch.Tensor and torch.equal(p * 2, values * 2)
    with torch.no_grad():
        p.add_(1.0)  # an optimizer's update: computed on the values, quantized back in
    assert isinstance(p, QuantizedTensor) and torch.equal(p.dequantize(), quantizer(values + 1.0).dequantize())
    with torch.no_grad():
        p.copy_(x)
    assert torch.equal(p.dequantize(), values)
    import io
    buffer = io.BytesIO()
    torch.save({"w": p}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)["w"]
    assert type(loaded) is type(p) and torch.equal(loaded.dequantize(), p.dequantize())
    xb = x.to(torch.bfloat16)
    for q in (MXFP8Quantizer(te.DType.kFloat8E4M3)(xb), NVFP4Quantizer(with_2d_quantization=True)(xb)):
        assert q.dtype == torch.bfloat16 and q.get_usages() == {"rowwise": True, "columnwise": True}
    with pytest.raises(RuntimeError, match="^RHT is only supported for bfloat16 input, got dtype enum value 4$"):
        NVFP4Quantizer(with_rht=True)(x)


def test_custom_recipe_resolves_to_the_built_in_recipe_of_its_quantizers():
    from nvfp4.torch._roles import QuantizerRole, linear_roles
    from nvfp4.torch.tensor import Float8CurrentScalingQuantizer, MXFP8Quantizer, resolve_custom_recipe
    seen = []

    def factory(role):
        seen.append(role)
        fmt = te.DType.kFloat8E5M2 if role is not None and role.tensor_type == "grad_output" else te.DType.kFloat8E4M3
        return Float8CurrentScalingQuantizer(fmt, "cpu", force_pow_2_scales=True)

    resolved = resolve_custom_recipe(R.CustomRecipe(qfactory=factory), linear_roles("fc1"))
    assert isinstance(resolved, R.Float8CurrentScaling) and resolved.fp8_format == R.Format.HYBRID
    assert R.to_library(resolved).use_power_2_scales is True
    assert seen == [QuantizerRole("linear", "input", "fc1"), QuantizerRole("linear", "weight", "fc1"), None,
                    QuantizerRole("linear", "grad_output", "fc1"), None]  # TE's slots, None where TE passes None
    mixed = R.CustomRecipe(qfactory=lambda role: MXFP8Quantizer(te.DType.kFloat8E4M3) if role and role.tensor_type == "weight"
                           else Float8CurrentScalingQuantizer(te.DType.kFloat8E4M3, "cpu"))
    with pytest.raises(ValueError, match="one built-in recipe's kind"):
        resolve_custom_recipe(mixed, linear_roles())
    with pytest.raises(ValueError, match="returned None for slot 2"):
        resolve_custom_recipe(R.CustomRecipe(qfactory=lambda role: None if role is None else factory(role)), linear_roles())
