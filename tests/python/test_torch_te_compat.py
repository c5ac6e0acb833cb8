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
    # A QuantizedTensor pickles with nvfp4.torch's classes, which torch >= 2.6's default weights-only
    # loader refuses (they are not on its allowlist): such a file loads with weights_only=False.
    loaded = torch.load(buffer, weights_only=False)["w"]
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


# ---- float16 and mixed precision (TE module/linear.py: the input and bias cast to the activation
# dtype, a quantized recipe quantizing the parameter as it is, outputs in the activation dtype) -----

RECIPES = {"none": lambda: None, "delayed": R.DelayedScaling, "current": R.Float8CurrentScaling,
           "block": R.Float8BlockScaling, "mxfp8": R.MXFP8BlockScaling, "nvfp4": R.NVFP4BlockScaling}


def one_step(layer, x, dy, recipe, autocast_dtype=None):
    x = x.detach().clone().requires_grad_()
    with torch.autocast("cpu", dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None):
        with te.autocast(enabled=recipe is not None, recipe=recipe):
            y = layer(x)
    y.backward(dy)
    return y.detach(), x.grad, layer.weight.grad, layer.bias.grad


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_the_float32_core_rounded_once_gives_the_bfloat16_cores_bits(name):
    # bf16 activations over bf16 parameters run on the library's bf16 core; over float32 parameters
    # holding the same values (under torch autocast) on its float32 core, the bias added after the
    # GEMM and each result rounded once: the float16 rule, checked here where both exist.
    torch.manual_seed(3)
    direct = te.Linear(64, 96, params_dtype=torch.bfloat16)
    with torch.no_grad():
        direct.bias.normal_()
    widened = te.Linear(64, 96)
    widened.load_state_dict({k: v.float() if v.is_floating_point() and k != "_extra_state" else v
                             for k, v in direct.state_dict().items()})
    x = torch.randn(32, 64).to(torch.bfloat16)
    dy = torch.randn(32, 96).to(torch.bfloat16)
    a = one_step(direct, x, dy, RECIPES[name]())
    b = one_step(widened, x.float(), dy, RECIPES[name](), autocast_dtype=torch.bfloat16)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1].float(), b[1])
    assert torch.equal(a[2].float(), b[2]) and torch.equal(a[3].float(), b[3])


@pytest.mark.parametrize("name", ["none", "delayed", "current", "block", "mxfp8"])
def test_float16_layers_round_the_float32_layers_results(name):
    # The same layer in float32 on float16 values, bias applied after, each result rounded to fp16.
    torch.manual_seed(4)
    half = te.Linear(64, 96, params_dtype=torch.float16)
    with torch.no_grad():
        half.bias.normal_()
    wide = te.Linear(64, 96, bias=False)
    with torch.no_grad():
        wide.weight.copy_(half.weight.float())
    x = torch.randn(32, 64).half()
    dy = torch.randn(32, 96).half()
    y, dx, dw, db = one_step(half, x, dy, RECIPES[name]())
    xw = x.float().requires_grad_()
    with te.autocast(enabled=name != "none", recipe=RECIPES[name]()):
        yw = wide(xw)
    yw.backward(dy.float())
    assert y.dtype == dx.dtype == dw.dtype == db.dtype == torch.float16
    assert torch.equal(y, (yw.detach() + half.bias.detach().float()).half())
    assert torch.equal(dx, xw.grad.half()) and torch.equal(dw, wide.weight.grad.half())
    assert torch.equal(db, dy.float().sum(0).half())


def test_a_float32_master_weight_is_quantized_as_it_is():
    # TE quantizes the parameter itself (module/linear.py quantize_weight), not its bf16 cast.
    import nvfp4
    torch.manual_seed(5)
    layer = te.Linear(64, 96, bias=False)
    x = torch.randn(32, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16), te.autocast(recipe=R.Float8CurrentScaling()):
        y = layer(x)
    xq = nvfp4.quantize_fp8_current(x.to(torch.bfloat16).float().numpy())
    wq = nvfp4.quantize_fp8_current(layer.weight.detach().numpy())
    expected = torch.from_numpy(nvfp4.fp8_gemm(xq, wq, promotion_interval=0)).to(torch.bfloat16)
    assert y.dtype == torch.bfloat16 and torch.equal(y, expected)


# ---- quantized parameters (TE quantization.py quantized_model_init, module/base.py reset_parameters)

@pytest.mark.parametrize("name", ["delayed", "current", "block", "mxfp8", "nvfp4"])
def test_quantized_model_init_holds_quantized_weights_that_train(name):
    from nvfp4.torch.quantized_tensor import QuantizedTensor
    recipe = RECIPES[name]()
    dtype = torch.bfloat16 if name == "nvfp4" else torch.float32  # TE's NVFP4 RHT needs bf16 activations
    torch.manual_seed(8)
    with te.quantized_model_init(recipe=recipe, preserve_high_precision_init_val=True):
        layer = te.Linear(64, 96, params_dtype=dtype)
    assert isinstance(layer.weight, QuantizedTensor) and isinstance(layer.weight, torch.nn.Parameter)
    assert not isinstance(layer.bias, QuantizedTensor)
    init = layer.weight.get_high_precision_init_val()
    assert init.device.type == "cpu" and init.dtype == dtype
    # TE's test_quantized_model_init_high_precision_init_val: quantizing the kept values again
    # gives the weight's values exactly.
    again = layer.weight._get_quantizer().make_empty(layer.weight.shape, dtype=layer.weight.dtype)
    layer.weight._get_quantizer().update_quantized(init, again)
    assert torch.equal(again.dequantize(), layer.weight.dequantize())
    layer.weight.clear_high_precision_init_val()
    assert layer.weight.get_high_precision_init_val() is None
    # The forward quantizes what the weight was quantized from: a plain layer with those values.
    plain = te.Linear(64, 96, params_dtype=dtype)
    with torch.no_grad():
        plain.weight.copy_(init)
    x = torch.randn(32, 64, dtype=dtype)
    with te.autocast(recipe=recipe):
        y, y_plain = layer(x), plain(x)
    assert torch.equal(y, y_plain)
    y.float().sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.dtype == dtype
    updated = layer.weight.dequantize()
    updated.add_(layer.weight.grad, alpha=-0.1)  # SGD's update, on the values the weight stands for
    torch.optim.SGD(layer.parameters(), lr=0.1).step()  # ... quantized back into the weight
    assert isinstance(layer.weight, QuantizedTensor)
    assert torch.equal(layer.weight.dequantize(), layer.weight._get_quantizer()(updated).dequantize())
    fresh = te.Linear(64, 96, params_dtype=dtype)
    fresh.load_state_dict(layer.state_dict())
    assert torch.equal(fresh.weight, layer.weight.dequantize())


def test_deferred_initialisation_on_the_meta_device():
    torch.manual_seed(9)
    eager = te.LayerNormLinear(64, 32)
    torch.manual_seed(9)
    lazy = te.LayerNormLinear(64, 32, device="meta")
    assert all(p.device.type == "meta" for p in lazy.parameters())
    lazy.reset_parameters(defer_init=True)  # TE: deferred, nothing happens
    assert lazy.weight.device.type == "meta"
    lazy.reset_parameters()
    assert [n for n, _ in lazy.named_parameters()] == [n for n, _ in eager.named_parameters()]
    for (name, a), b in zip(eager.named_parameters(), lazy.parameters()):
        assert b.device.type == "cpu" and torch.equal(a, b), name  # the same initialisers in the same order
    x = torch.randn(8, 64)
    assert torch.equal(te.Linear(64, 16, device="meta")(x).isfinite(), torch.ones(8, 16, dtype=torch.bool))


# ---- te.checkpoint (TE distributed.py checkpoint) ------------------------------------------------

class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = te.Linear(64, 128), te.LayerNormLinear(128, 64)

    def forward(self, x):
        return self.fc2(torch.nn.functional.dropout(torch.nn.functional.gelu(self.fc1(x)), p=0.1))


class _Wrapped(torch.nn.Module):
    def __init__(self, block, reentrant):
        super().__init__()
        self.block, self.reentrant = block, reentrant

    def forward(self, x):
        return te.checkpoint(self.block, x, use_reentrant=self.reentrant)


def _train(layers, xs, recipe):
    """Training steps of the layers in sequence, each step's output and gradients."""
    out = []
    for x in xs:
        x = x.detach().clone().requires_grad_()
        with te.autocast(recipe=recipe):
            y = x
            for layer in layers:
                y = layer(y)
        y.float().sum().backward()
        out.append([y.detach(), x.grad] + [p.grad.clone() for layer in layers for p in layer.parameters()])
        for layer in layers:
            layer.zero_grad(set_to_none=True)
    return out


@pytest.mark.parametrize("name", ["delayed", "current", "mxfp8", "nvfp4"])
@pytest.mark.parametrize("reentrant", [True, False])
@pytest.mark.parametrize("first", ["outside", "inside"])
def test_checkpoint_recomputes_the_forwards_bits(name, reentrant, first):
    # Three steps of layers [a, block, c] (first="inside": [block, c]), the block checkpointed or
    # not: the same outputs and gradients bit for bit. Delayed scaling's scales change from step to
    # step (the region's updates), so a recompute with the updated scale, or an update run twice,
    # shows in the second and third steps.
    recipe = RECIPES[name]()
    dtype = torch.bfloat16 if name == "nvfp4" else torch.float32

    def build(wrap):
        torch.manual_seed(10)
        a, block, c = te.Linear(64, 64), _Block(), te.Linear(64, 64)
        layers = [a, _Wrapped(block, reentrant) if wrap else block, c]
        return [layer.to(dtype) for layer in (layers if first == "outside" else layers[1:])]

    torch.manual_seed(11)
    xs = [torch.randn(32, 64, dtype=dtype) for _ in range(3)]
    torch.manual_seed(12)
    plain = _train(build(False), xs, recipe)
    torch.manual_seed(12)
    checkpointed = _train(build(True), xs, recipe)
    for step, (a, b) in enumerate(zip(plain, checkpointed)):
        assert all(torch.equal(u, v) for u, v in zip(a, b)), step


def test_checkpoint_without_te_modules_is_torchs():
    f = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8, requires_grad=True)
    te.checkpoint(f, x).sum().backward()
    expected = torch.autograd.grad(f(x).sum(), x)[0]
    assert torch.equal(x.grad, expected)
    tracker = te.CudaRNGStatesTracker()
    tracker.add("model-parallel-rng", 5)
    with tracker.fork():
        a = torch.rand(3)
    with pytest.raises(RuntimeError, match="seed 5 already exists"):
        tracker.add("other", 5)
    torch.manual_seed(5)
    assert torch.equal(a, torch.rand(3))


# ---- calibration (TE: autocast(calibrating=True), Float8Quantizer.calibrate) ---------------------

def test_calibration_records_amaxes_in_high_precision():
    torch.manual_seed(13)
    layer, plain = te.Linear(64, 32), te.Linear(64, 32)
    plain.load_state_dict(layer.state_dict())
    big, small = torch.randn(16, 64) * 4, torch.randn(16, 64) * 0.5
    recipe = R.DelayedScaling(amax_history_len=4)
    with te.autocast(enabled=False, calibrating=True, recipe=recipe):
        y = layer(big)
    assert torch.equal(y, plain(big))  # the GEMM in high precision
    state = layer._unit.extra_state()["scaling"]
    assert state["input.amax_history"][0].item() == big.abs().max().item()
    assert state["weight.amax_history"][0].item() == layer.weight.abs().max().item()
    assert state["input.scale"].item() == 1.0 and state["input.amax_history"][1:].abs().sum().item() == 0
    assert layer.state_dict()["_extra_state"].numel() > 0  # TE's fp8_checkpoint is set by calibration
    # The next quantized region starts from the recorded history: its input scale comes from the
    # calibrated amax (the larger), not from its own input alone.
    with te.autocast(recipe=recipe):
        layer(small).sum().backward()
    assert layer._unit.core.scaling_state("input")["scale"] == pytest.approx(448 / big.abs().max().item(), rel=1e-6)
    with te.autocast(enabled=False, calibrating=True, recipe=R.Float8CurrentScaling()):
        assert torch.equal(layer(big), plain(big))  # nothing to record for a stateless recipe


# ---- what TE refuses (module/_te_checks.py; each message TE's) -----------------------------------

def test_te_strictness_is_the_default():
    # Not a setting: the library's own tests turn it off only to compare with the C++ layer on
    # inputs TE refuses (te_lenient). The refusals below run with the default.
    from nvfp4.torch.module import _te_checks
    assert _te_checks.TE_STRICT is True


def test_fp8_shape_rule_and_the_quantizers_dims():
    layer = te.Linear(64, 64)
    with pytest.raises(ValueError, match=r"^FP8 execution requires the product of all dimensions except the last to be divisible "
                                         r"by 8 and the last dimension to be divisible by 16, but got tensor with dims=\[12, 64\] "
                                         r"\(product of leading dims = 12, last dim = 64\)$"):
        with te.autocast(recipe=R.Float8CurrentScaling()):
            layer(torch.randn(12, 64))
    with pytest.raises(ValueError, match=r"dims=\[36, 64\]"):  # the weight [out, in] too
        with te.autocast(recipe=R.DelayedScaling()):
            te.Linear(64, 36)(torch.randn(16, 64))
    with pytest.raises(RuntimeError, match=r"^MXFP8 requires tensor dims that are divisible by 32 \(got shape=\(48,64\)\)$"):
        with te.autocast(recipe=R.MXFP8BlockScaling()):
            layer(torch.randn(48, 64))
    vanilla = R.NVFP4BlockScaling(disable_rht=True, disable_stochastic_rounding=True, disable_2d_quantization=True)
    with pytest.raises(RuntimeError, match=r"^First dim for NVFP4 must be divisible by 16 \(got shape=\(24,64\)\)$"):
        with te.autocast(recipe=vanilla):
            layer(torch.randn(24, 64))
    with pytest.raises(RuntimeError, match=r"^First dim for NVFP4 must be divisible by 16 \(got shape=\(40,64\)\)$"):
        with te.autocast(recipe=vanilla):
            te.Linear(64, 40)(torch.randn(16, 64))
    assert layer(torch.randn(12, 64)).shape == (12, 64)  # no recipe: any shape, and the refusals changed nothing


def test_nvfp4_dtype_rules():
    with pytest.raises(RuntimeError, match="^RHT is only supported for bfloat16 input, got dtype enum value 4$"):
        with te.autocast(recipe=R.NVFP4BlockScaling()):
            te.Linear(64, 64)(torch.randn(16, 64))
    with pytest.raises(RuntimeError, match="^RHT is only supported for bfloat16 input, got dtype enum value 5$"):
        with te.autocast(recipe=R.NVFP4BlockScaling()):
            te.Linear(64, 64, params_dtype=torch.float16)(torch.randn(16, 64).half())
    with pytest.raises(RuntimeError, match="^FP4 GEMM does not support FP16 output!$"):
        with te.autocast(recipe=R.NVFP4BlockScaling(disable_rht=True)):
            te.Linear(64, 64, params_dtype=torch.float16)(torch.randn(16, 64).half())
    with te.autocast(recipe=R.NVFP4BlockScaling()):
        assert te.Linear(64, 64, params_dtype=torch.bfloat16)(torch.randn(16, 64).bfloat16()).dtype == torch.bfloat16


def test_parameter_dtypes_must_match_the_input_outside_autocast():
    layer = te.LayerNormLinear(64, 32)
    with pytest.raises(TypeError, match=r"^Data types for parameters must match when outside of autocasted region. "
                                        r"Found input dtype: torch.bfloat16 and 'layer_norm_weight' dtype: torch.float32$"):
        layer(torch.randn(8, 64).bfloat16())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(torch.randn(8, 64)).dtype == torch.bfloat16  # TE's mixed precision
    # TE checks when the module's activation dtype changes: after an autocast call in bf16, a bf16
    # input outside autocast passes (module/base.py set_activation_dtype caches it).
    assert layer(torch.randn(8, 64).bfloat16()).dtype == torch.bfloat16


def test_a_custom_recipe_runs_as_its_built_in_recipe():
    from nvfp4.torch.tensor import Float8CurrentScalingQuantizer
    names = []

    def factory(role):
        if role is not None:
            names.append(role.name)
        fmt = te.DType.kFloat8E5M2 if role is not None and role.tensor_type == "grad_output" else te.DType.kFloat8E4M3
        return Float8CurrentScalingQuantizer(fmt, "cpu")

    torch.manual_seed(14)
    layer, twin = te.Linear(64, 64, name="proj"), te.Linear(64, 64)
    twin.load_state_dict(layer.state_dict())
    x, dy = torch.randn(32, 64), torch.randn(32, 64)
    a = one_step(layer, x, dy, R.CustomRecipe(qfactory=factory))
    b = one_step(twin, x, dy, R.Float8CurrentScaling())
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    assert set(names) == {"proj"}  # TE's roles carry the module's name


# ---- backward_override (TE module/linear.py: high-precision backward GEMMs) ---------------------

@pytest.mark.parametrize("name", ["current", "block", "mxfp8", "nvfp4"])
@pytest.mark.parametrize("mode", ["dequantized", "high_precision"])
def test_backward_override_runs_the_backward_in_high_precision(name, mode):
    import nvfp4
    dtype = torch.bfloat16 if name == "nvfp4" else torch.float32
    torch.manual_seed(15)
    layer = te.Linear(128, 64, params_dtype=dtype)
    twin = te.Linear(128, 64, params_dtype=dtype)
    twin.load_state_dict(layer.state_dict())
    x, dy = torch.randn(32, 128, dtype=dtype), torch.randn(32, 64, dtype=dtype)
    recipe = RECIPES[name]()
    recipe.backward_override = mode
    y, dx, dw, db = one_step(layer, x, dy, recipe)
    y_plain = one_step(twin, x, dy, RECIPES[name]())[0]
    assert torch.equal(y, y_plain)  # the forward is the recipe's
    w = layer.weight.detach().float()
    xs = x.float()
    if mode == "dequantized":  # the forward's rowwise copies, dequantized (quantized here by the library's calls)
        from nvfp4.torch.module._te_module import input_quantizer, weight_quantizer
        plain_recipe = RECIPES[name]()
        xs = input_quantizer(plain_recipe)(x).dequantize(dtype=dtype).float()
        wq = weight_quantizer(plain_recipe)
        wq.set_usage(rowwise=True, columnwise=False)
        w = wq(layer.weight.detach()).dequantize(dtype=dtype).float()
        assert not torch.equal(w, layer.weight.detach().float())
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dx.float(), dy.float() @ w, **tol)
    torch.testing.assert_close(dw.float(), dy.float().T @ xs, **tol)
    torch.testing.assert_close(db.float(), dy.float().sum(0), **tol)
    with pytest.raises(ValueError, match="Delayed scaling only supports backward_override=None"):
        R.DelayedScaling(backward_override=mode)


# ---- the autocast object and the queries (TE quantization.py) -------------------------------------

def test_autocast_is_a_reusable_object_and_the_queries_have_tes_signatures():
    region = te.autocast(recipe=R.Float8CurrentScaling())
    layer = te.Linear(64, 64)
    x = torch.randn(16, 64)
    with region:
        first = layer(x)
    with region:  # entered again once it exited, as TE's class allows
        assert torch.equal(layer(x), first) and te.is_fp8_enabled()
    with pytest.raises(RuntimeError, match="^autocast context manager cannot be entered more than once concurrently$"):
        with region:
            with region:
                pass
    assert not te.is_fp8_enabled()  # the failed entry left the outer one to exit cleanly
    assert te.is_fp8_available() is True and te.is_mxfp8_available(return_reason=True) == (True, "")
    assert te.is_nvfp4_available(True) == (True, "") and te.is_fp8_block_scaling_available() is True
    assert isinstance(te.get_default_recipe(), R.DelayedScaling)
    from nvfp4.torch import quantization
    assert quantization.quantized_model_init is te.quantized_model_init and quantization.get_default_recipe is te.get_default_recipe


def test_deprecated_fp8_autocast_runs_as_autocast_and_warns_as_te():
    # The one use of TE 1.x's spelling (the rest of the tests use autocast): TE 2.x keeps
    # fp8_autocast as a wrapper that warns DeprecationWarning (pointing at the caller, stacklevel 2)
    # and maps fp8_recipe -> recipe, fp8_group -> amax_reduction_group
    # (transformer_engine/pytorch/quantization.py, fp8_autocast).
    layer, x = te.Linear(64, 64), torch.randn(16, 64)
    current = R.Float8CurrentScaling()
    with te.autocast(recipe=current):
        expected = layer(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        region = te.fp8_autocast(enabled=True, fp8_recipe=current, fp8_group=None)
    assert [(w.category, w.filename) for w in caught] == [(DeprecationWarning, __file__)]
    assert str(caught[0].message).startswith("fp8_autocast is deprecated and will be removed in a future release. Use autocast(")
    assert isinstance(region, te.autocast)
    with region:
        assert te.is_fp8_enabled() and te.get_fp8_recipe() is current
        assert torch.equal(layer(x), expected)
    assert not te.is_fp8_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with te.fp8_autocast(enabled=False, fp8_recipe=current):
            assert not te.is_fp8_enabled()


def test_backward_override_keeps_torchs_autograd_contract():
    layer = te.Linear(64, 64)
    recipe = R.Float8CurrentScaling()
    recipe.backward_override = "high_precision"
    x = torch.randn(16, 64, requires_grad=True)
    with te.autocast(recipe=recipe):
        y = layer(x)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    with pytest.raises(RuntimeError):  # a third backward: the graph was freed, torch's error
        y.sum().backward()
    with te.autocast(recipe=recipe):
        y = layer(x)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="cannot be differentiated again"):
        g.sum().backward()


def test_roles_assigned_to_a_recipe_a_layer_already_ran_take_effect():
    # TE leaves such a change stale (its set_meta_tensor TODO #3157); here it reaches the layer.
    torch.manual_seed(16)
    layer = te.Linear(64, 64, params_dtype=torch.bfloat16)
    x = torch.randn(32, 64, dtype=torch.bfloat16)
    recipe = R.NVFP4BlockScaling()
    with torch.no_grad(), te.autocast(recipe=recipe):
        before = layer(x)
        for role in ("fp4_quant_fwd_inp", "fp4_quant_fwd_weight", "fp4_quant_bwd_grad"):
            setattr(recipe, role, R.QParams())
        after = layer(x)
    with torch.no_grad(), te.autocast(recipe=R.NVFP4BlockScaling(disable_rht=True, disable_stochastic_rounding=True,
                                                                 disable_2d_quantization=True)):
        expected = layer(x)
    assert torch.equal(after, expected) and not torch.equal(before, after)


# ---- parameters_split (TE module/linear.py, layernorm_linear.py: one GEMM's weight and bias held as
# named Parameters, one per block of rows, concatenated for the GEMM) ------------------------------

def test_parameters_split_names_and_slices():
    split = te.Linear(32, 48, parameters_split={"query_": 16, "key": 8, "value": 24})
    assert [(n, tuple(p.shape)) for n, p in split.named_parameters()] == [
        ("query_weight", (16, 32)), ("key_weight", (8, 32)), ("value_weight", (24, 32)),
        ("query_bias", (16,)), ("key_bias", (8,)), ("value_bias", (24,))]  # weights together, trailing _ dropped
    assert list(split.state_dict())[-1] == "_extra_state" and not hasattr(split, "weight")
    even = te.Linear(32, 48, parameters_split=("a", "b", "c"), bias=False)  # equal blocks from a tuple of names
    assert [(n, tuple(p.shape)) for n, p in even.named_parameters()] == [("a_weight", (16, 32)), ("b_weight", (16, 32)),
                                                                         ("c_weight", (16, 32))]
    assert all(getattr(even, f"{n}_bias").numel() == 0 for n in "abc")  # TE's empty tensors, not parameters
    # Each block initialised by itself, in registration order (TE's reset_parameters).
    torch.manual_seed(11)
    split = te.Linear(32, 48, parameters_split={"query": 16, "key": 8, "value": 24})
    torch.manual_seed(11)
    draws = [torch.nn.init.normal_(torch.empty(rows, 32), mean=0.0, std=0.023) for rows in (16, 8, 24)]
    assert all(torch.equal(getattr(split, f"{n}_weight"), d) for n, d in zip(("query", "key", "value"), draws))
    assert all(torch.count_nonzero(getattr(split, f"{n}_bias")) == 0 for n in ("query", "key", "value"))


@pytest.mark.parametrize("name", ["none", "delayed", "mxfp8", "nvfp4"])
def test_a_split_layer_computes_the_concatenated_layers_bits(name):
    dtype = torch.bfloat16 if name == "nvfp4" else torch.float32  # TE's NVFP4 RHT needs bf16
    torch.manual_seed(12)
    split = te.LayerNormLinear(64, 96, parameters_split=("query", "key", "value"), params_dtype=dtype)
    whole = te.LayerNormLinear(64, 96, params_dtype=dtype)
    with torch.no_grad():
        for n in ("query", "key", "value"):
            getattr(split, f"{n}_bias").normal_()
        whole.layer_norm_weight.copy_(split.layer_norm_weight)
        whole.weight.copy_(torch.cat([split.query_weight, split.key_weight, split.value_weight]))
        whole.bias.copy_(torch.cat([split.query_bias, split.key_bias, split.value_bias]))
    x = torch.randn(32, 64, dtype=dtype)
    dy = torch.randn(32, 96, dtype=dtype)
    outputs = []
    for layer in (split, whole):
        xi = x.clone().requires_grad_()
        with te.autocast(enabled=name != "none", recipe=RECIPES[name]()):
            y = layer(xi)
        y.backward(dy)
        outputs.append((y, xi.grad))
    assert torch.equal(outputs[0][0], outputs[1][0]) and torch.equal(outputs[0][1], outputs[1][1])
    # each block's gradient is its rows of the whole weight's and bias's
    assert torch.equal(torch.cat([split.query_weight.grad, split.key_weight.grad, split.value_weight.grad]), whole.weight.grad)
    assert torch.equal(torch.cat([split.query_bias.grad, split.key_bias.grad, split.value_bias.grad]), whole.bias.grad)


def test_split_return_bias_is_the_concatenated_bias_in_the_activation_dtype():
    layer = te.Linear(32, 48, parameters_split={"q": 32, "k": 16}, return_bias=True)
    with torch.no_grad():
        layer.q_bias.normal_(), layer.k_bias.normal_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, bias = layer(torch.randn(8, 32))
    assert y.dtype == bias.dtype == torch.bfloat16
    assert torch.equal(bias, torch.cat([layer.q_bias, layer.k_bias]).to(torch.bfloat16))


def test_parameters_split_refusals_are_tes():
    with pytest.raises(ValueError, match=r"^Cannot split weight buffer into 0 parameters$"):
        te.Linear(32, 48, parameters_split={})
    with pytest.raises(ValueError, match=r"^Trying to split weight buffer \(out_features=48\) with split sizes \[16, 16\]$"):
        te.Linear(32, 48, parameters_split={"a": 16, "b": 16})
    with pytest.raises(TypeError, match=r"^Invalid configuration for parameters split$"):
        te.Linear(32, 48, parameters_split=(16, 32))
    with pytest.raises(AssertionError, match=r"^Cannot split module parameters on 'meta' device\.$"):
        te.Linear(32, 48, parameters_split=("a", "b"), device="meta")
    # column parallelism: TE divides out_features first, then each block over the ranks
    with pytest.raises(ValueError, match=r"^9 is not divisible by 2$"):
        te.Linear(16, 9, parallel_mode="column", tp_size=2, parameters_split={"a": 3, "b": 6})
    with pytest.raises(RuntimeError, match=r"^Attempting to distribute a parameter with out_features=3 between 2 "
                                           r"tensor-parallel processes$"):
        te.Linear(16, 12, parallel_mode="column", tp_size=2, parameters_split={"a": 3, "b": 9})
    column = te.Linear(16, 12, parallel_mode="column", tp_size=2, parameters_split={"a": 4, "b": 8})
    assert (column.a_weight.shape, column.b_weight.shape, column.b_bias.shape) == ((2, 16), (4, 16), (4,))
    with pytest.raises(RuntimeError, match=r"^Splitting QuantizedTensor into multiple params is not supported$"):
        with te.quantized_model_init(recipe=R.Float8CurrentScaling()):
            te.Linear(32, 48, parameters_split=("a", "b"))
    # TE's LayerNormLinear makes no meta assertion: its split parameters are initialised later
    torch.manual_seed(13)
    eager = te.LayerNormLinear(32, 48, parameters_split=("a", "b"))
    torch.manual_seed(13)
    lazy = te.LayerNormLinear(32, 48, parameters_split=("a", "b"), device="meta")
    assert lazy.a_weight.device.type == "meta"
    lazy.reset_parameters()
    assert all(torch.equal(p, q) for p, q in zip(eager.parameters(), lazy.parameters()))


# ---- the multi-GEMM modules on TE's module base (TE module/base.py; layernorm_mlp.py, grouped_linear.py)

def test_multi_gemm_modules_defer_initialisation_to_reset_parameters():
    makers = {"LayerNormMLP": lambda device: te.LayerNormMLP(64, 96, device=device),
              "GroupedLinear": lambda device: te.GroupedLinear(2, 64, 32, device=device),
              "MultiheadAttention": lambda device: te.MultiheadAttention(64, 4, input_layernorm=True, device=device),
              "fused MultiheadAttention": lambda device: te.MultiheadAttention(64, 4, fuse_qkv_params=True, device=device),
              "TransformerLayer": lambda device: te.TransformerLayer(64, 96, 4, device=device)}
    for name, make in makers.items():
        torch.manual_seed(14)
        eager = make("cpu")
        torch.manual_seed(14)
        lazy = make("meta")
        assert all(p.device.type == "meta" for p in lazy.parameters()), name
        for module in lazy.modules():  # as FSDP does: each module holding parameters resets its own
            if any(p.device.type == "meta" for p in module.parameters(recurse=False)):
                module.reset_parameters()
        assert [n for n, _ in lazy.named_parameters()] == [n for n, _ in eager.named_parameters()], name
        for (n, a), b in zip(eager.named_parameters(), lazy.parameters()):
            assert b.device.type == "cpu" and torch.equal(a, b), (name, n)  # TE's initialisers in TE's order
    # TE's MultiheadAttention without an input norm splits a te.Linear: TE's assertion on the meta device
    with pytest.raises(AssertionError, match=r"^Cannot split module parameters on 'meta' device\.$"):
        te.MultiheadAttention(64, 4, device="meta")


def test_multi_gemm_modules_refuse_mixed_dtypes_outside_autocast_as_te():
    message = r"^Data types for parameters must match when outside of autocasted region. Found input dtype: torch.bfloat16 and '{}' dtype: torch.float32$"
    x = torch.randn(16, 64).bfloat16()
    with pytest.raises(TypeError, match=message.format("layer_norm_weight")):
        te.LayerNormMLP(64, 96)(x)
    with pytest.raises(TypeError, match=message.format("weight0")):
        te.GroupedLinear(2, 64, 32)(x, [8, 8])
    with torch.autocast("cpu", dtype=torch.bfloat16):  # TE's mixed precision
        assert te.LayerNormMLP(64, 96)(x.float()).dtype == torch.bfloat16
        assert te.GroupedLinear(2, 64, 32)(x.float(), [8, 8]).dtype == torch.bfloat16


def test_layernorm_mlp_refuses_before_any_gemm_runs():
    # TE checks the input and both weights at once (layernorm_mlp.py assert_dim_for_fp8_exec); the
    # quantizers' checks of fc2's operands run here before fc1 does, so a refusal changes nothing.
    mlp = te.LayerNormMLP(64, 40)  # ffn_hidden_size 40: fc2's weight [64, 40] is off TE's grid
    recipe = R.DelayedScaling(amax_history_len=2)
    with pytest.raises(ValueError, match=r"dims=\[64, 40\] \(product of leading dims = 64, last dim = 40\)$"):
        with te.autocast(recipe=recipe):
            mlp(torch.randn(16, 64))
    assert mlp._fc1.extra_state()["scaling"] == {}  # fc1 did not run
    # swiglu, ffn_hidden_size 48: fc1's weight [96, 64] is on MXFP8's grid, fc2's input [32, 48] is not
    mxfp8 = te.LayerNormMLP(64, 48, activation="swiglu")
    calls = []
    run = mxfp8._fc1.run
    mxfp8._fc1.run = lambda *args: calls.append(1) or run(*args)
    with pytest.raises(RuntimeError, match=r"^MXFP8 requires tensor dims that are divisible by 32 \(got shape=\(32,48\)\)$"):
        with te.autocast(recipe=R.MXFP8BlockScaling()):
            mxfp8(torch.randn(32, 64))
    assert calls == []  # fc1 did not run
    with te.autocast(recipe=R.Float8CurrentScaling()):
        mxfp8(torch.randn(32, 64))
    assert calls == [1]


def test_grouped_linear_checks_each_experts_quantizers_before_any_runs():
    # TE's GroupedLinear makes no FP8 shape assertion (any split under FP8 scaling) but each
    # expert's quantizer makes its own checks (TE's split_quantize: MXFP8 32, NVFP4 16 per split).
    experts = te.GroupedLinear(2, 64, 32)
    with te.autocast(recipe=R.Float8CurrentScaling()):
        assert experts(torch.randn(20, 64), [12, 8]).shape == (20, 32)
    with pytest.raises(RuntimeError, match=r"^MXFP8 requires tensor dims that are divisible by 32 \(got shape=\(16,64\)\)$"):
        with te.autocast(recipe=R.MXFP8BlockScaling()):
            experts(torch.randn(48, 64), [32, 16])
    bf16 = te.GroupedLinear(2, 64, 32, params_dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"^First dim for NVFP4 must be divisible by 16 \(got shape=\(8,64\)\)$"):
        with te.autocast(recipe=R.NVFP4BlockScaling()):
            bf16(torch.randn(24, 64).bfloat16(), [16, 8])
    assert [u.extra_state()["steps"] for u in bf16._units] == [0, 0]  # expert 0 did not run either


def test_layernorm_mlp_and_grouped_linear_return_bias_in_the_activation_dtype():
    mlp = te.LayerNormMLP(64, 96, return_bias=True)
    experts = te.GroupedLinear(2, 64, 32, return_bias=True)
    with torch.no_grad():
        mlp.fc2_bias.normal_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, bias = mlp(torch.randn(16, 64))
        _, biases = experts(torch.randn(16, 64), [8, 8])
    assert y.dtype == bias.dtype == torch.bfloat16 and torch.equal(bias, mlp.fc2_bias.to(torch.bfloat16))
    assert [b.dtype for b in biases] == [torch.bfloat16] * 2
    no_bias = te.LayerNormMLP(64, 96, bias=False, return_bias=True)
    y, bias = no_bias(torch.randn(16, 64))
    assert bias.numel() == 0 and bias.dtype == torch.float32  # TE's empty tensor, cast to the activation dtype
    assert [n for n, _ in no_bias.named_parameters()] == ["layer_norm_weight", "layer_norm_bias", "fc1_weight", "fc2_weight"]
