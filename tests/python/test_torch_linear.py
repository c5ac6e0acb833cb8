# nvfp4.torch's Linear family against the C++ layer: the C++ program's NVFP4 Linear step
# (write_reference.cpp), the numpy binding of nn::linear for every recipe and both parameter
# dtypes (forward, dX, dW, db, bit for bit), and a Float8CurrentScaling step rebuilt by hand from
# the public FP8 quantizers and GEMM (the composition docs/recipes.md states).
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4  # noqa: E402
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402

RECIPES = {
    "none": lambda: None,
    "delayed": te_recipe.DelayedScaling,
    "current": te_recipe.Float8CurrentScaling,
    "block": te_recipe.Float8BlockScaling,
    "mxfp8": te_recipe.MXFP8BlockScaling,
    "nvfp4": te_recipe.NVFP4BlockScaling,
}


@pytest.fixture
def te_lenient(monkeypatch):
    """The library's bits on inputs TE refuses (NVFP4's RHT on float32, shapes off TE's grid):
    TE's refusals off for a test that compares with the C++ layer there."""
    from nvfp4.torch.module import _te_checks
    monkeypatch.setattr(_te_checks, "TE_STRICT", False)


def bits(t):
    """A tensor's values as float32 bytes (bf16 widens exactly)."""
    return t.detach().to(torch.float32).numpy().tobytes()


def raw(t):
    """A tensor's own bytes (bf16 as its 16-bit patterns)."""
    t = t.detach().contiguous()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()


def region(recipe):
    return te.autocast(enabled=recipe is not None, recipe=recipe)


def test_nvfp4_linear_step_equals_the_cpp_program(reference_dir, te_lenient):
    arrays = {p.stem: np.load(p) for p in reference_dir.glob("*.npy")}
    layer = te.Linear(256, 48, bias=False, seed=5)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(arrays["b"]))
    x = torch.from_numpy(arrays["x"]).requires_grad_()
    with te.autocast(recipe=te_recipe.NVFP4BlockScaling()):
        y = layer(x)
    y.backward(torch.from_numpy(arrays["linear_dy"]))
    assert y.detach().numpy().tobytes() == arrays["linear_y"].tobytes()
    assert x.grad.numpy().tobytes() == arrays["linear_dx"].tobytes()
    assert layer.weight.grad.numpy().tobytes() == arrays["linear_dw"].tobytes()


@pytest.mark.parametrize("name", sorted(RECIPES))
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_every_recipe_gives_the_bits_of_the_cpp_layer(name, dtype, te_lenient):
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    rng = np.random.default_rng(3)
    m, k, n = 48, 256, 160
    x32 = rng.standard_normal((m, k)).astype(np.float32)
    w32 = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    b32 = (rng.standard_normal(n) * 0.1).astype(np.float32)
    dy32 = (rng.standard_normal((m, n)) * 1e-3).astype(np.float32)
    layer = te.Linear(k, n, params_dtype=torch_dtype, seed=11)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(w32))
        layer.bias.copy_(torch.from_numpy(b32))
    # The C++ layer sees the parameters and inputs as the torch layer holds them (bf16 values).
    w, b = layer.weight.detach().float().numpy(), layer.bias.detach().float().numpy()
    x = torch.from_numpy(x32).to(torch_dtype).requires_grad_()
    dy = torch.from_numpy(dy32).to(torch_dtype)
    recipe = RECIPES[name]()
    with region(recipe):
        y = layer(x)
    y.backward(dy)

    cpp = nvfp4.Linear(k, n, te_recipe.to_library(recipe), bias=True, dtype=dtype, seed=11)
    cpp.weight[:] = w
    cpp.bias[:] = b
    y_ref = cpp.forward(x.detach().float().numpy())
    dx_ref = cpp.backward(dy.float().numpy())
    assert y.dtype == torch_dtype and x.grad.dtype == torch_dtype and layer.weight.grad.dtype == torch_dtype
    assert bits(y) == y_ref.tobytes()
    assert bits(x.grad) == dx_ref.tobytes()
    # dW and db: fp32 from the layer (TE's wgrad GEMM output), rounded once to a bf16 parameter's dtype.
    assert raw(layer.weight.grad) == raw(torch.from_numpy(cpp.weight_grad).to(torch_dtype))
    assert raw(layer.bias.grad) == raw(torch.from_numpy(cpp.bias_grad).to(torch_dtype))


def test_current_scaling_step_is_the_public_quantizers_and_gemm():
    # Float8CurrentScaling (HYBRID), fp32 layer without bias: y = x w^T with per-tensor E4M3 codes and
    # fast accumulation; dX = dy w with E5M2 dy codes and the split accumulator (docs/recipes.md).
    rng = np.random.default_rng(8)
    x = rng.standard_normal((32, 128)).astype(np.float32)
    w = (rng.standard_normal((64, 128)) * 0.1).astype(np.float32)
    dy = (rng.standard_normal((32, 64)) * 0.01).astype(np.float32)
    layer = te.Linear(128, 64, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(w))
    xt = torch.from_numpy(x).requires_grad_()
    with te.autocast(recipe=te_recipe.Float8CurrentScaling()):
        y = layer(xt)
    y.backward(torch.from_numpy(dy))
    xq, wq = nvfp4.quantize_fp8_current(x), nvfp4.quantize_fp8_current(w)
    assert y.detach().numpy().tobytes() == nvfp4.fp8_gemm(xq, wq, promotion_interval=0).tobytes()
    dyq = nvfp4.quantize_fp8_current(dy, "e5m2")
    wt = nvfp4.quantize_fp8_with_scale(np.ascontiguousarray(w.T), scale=wq.scale, axis="columnwise")
    assert xt.grad.numpy().tobytes() == nvfp4.fp8_gemm(dyq, wt, promotion_interval=128).tobytes()


def test_shapes_bias_and_return_bias():
    layer = te.Linear(64, 32, return_bias=True)
    x = torch.randn(2, 3, 64)
    y, b = layer(x)
    assert y.shape == (2, 3, 32) and b is layer.bias
    plain = te.Linear(64, 32, bias=False)
    with torch.no_grad():
        plain.weight.copy_(layer.weight)
    assert torch.equal(plain(x), y)  # the returned bias is not added
    assert dict(te.Linear(4, 8).named_parameters()).keys() == {"weight", "bias"}
    no_bias = te.Linear(4, 8, bias=False).bias  # TE: an empty tensor, not a parameter
    assert torch.is_tensor(no_bias) and no_bias.numel() == 0 and "bias" not in dict(te.Linear(4, 8, bias=False).state_dict())
    assert te.Linear(4, 8, params_dtype=torch.bfloat16).weight.dtype == torch.bfloat16


def test_is_first_microbatch_keeps_the_quantized_weight():
    layer = te.Linear(64, 32, bias=False)
    x = torch.randn(16, 64)
    with torch.no_grad(), te.autocast(recipe=te_recipe.NVFP4BlockScaling(disable_rht=True)):  # TE's RHT needs bf16
        first = layer(x, is_first_microbatch=True)
        layer.weight.mul_(2.0)  # the kept quantized W is used while is_first_microbatch=False
        reused = layer(x, is_first_microbatch=False)
        fresh = layer(x)
    assert torch.equal(first, reused)
    assert not torch.equal(first, fresh)


def test_weights_are_read_in_place():
    layer = te.Linear(32, 16, bias=False)
    x = torch.randn(4, 32)
    before = layer(x).detach()
    with torch.no_grad():
        layer.weight.zero_()
    assert torch.count_nonzero(layer(x)) == 0 and torch.count_nonzero(before) > 0


def test_layernorm_linear_and_mlp_compose_norm_and_linear():
    torch.manual_seed(0)
    x = torch.randn(32, 64)  # MXFP8: TE's dims divisible by 32
    recipe = te_recipe.MXFP8BlockScaling()
    for normalization in ("LayerNorm", "RMSNorm"):
        fused = te.LayerNormLinear(64, 32, normalization=normalization)
        norm = (te.LayerNorm if normalization == "LayerNorm" else te.RMSNorm)(64)
        lin = te.Linear(64, 32)
        with torch.no_grad():
            lin.weight.copy_(fused.weight)
            lin.bias.copy_(fused.bias)
        with te.autocast(recipe=recipe):
            assert torch.equal(fused(x), lin(norm(x)))
    mlp = te.LayerNormMLP(64, 128, activation="swiglu", normalization="RMSNorm")
    assert mlp.fc1_weight.shape == (256, 64) and mlp.fc2_weight.shape == (64, 128)
    fc1, fc2, norm = te.Linear(64, 256), te.Linear(128, 64), te.RMSNorm(64)
    with torch.no_grad():
        fc1.weight.copy_(mlp.fc1_weight), fc2.weight.copy_(mlp.fc2_weight)
    with te.autocast(recipe=recipe):
        a, g = fc1(norm(x)).chunk(2, dim=-1)
        expected = fc2(torch.nn.functional.silu(a) * g)
        assert torch.equal(mlp(x), expected)


def test_norms_compute_in_float32_and_return_their_dtype():
    # TE's norms compute in their weight's dtype (torch autocast's when on): bf16 parameters here.
    x = torch.randn(4, 32).to(torch.bfloat16)
    ln = te.LayerNorm(32, eps=1e-5, params_dtype=torch.bfloat16)
    expected = torch.nn.functional.layer_norm(x.float(), (32,), eps=1e-5).to(torch.bfloat16)
    assert torch.equal(ln(x), expected)
    rms = te.RMSNorm(32, zero_centered_gamma=True, params_dtype=torch.bfloat16)
    x32 = x.float()
    assert torch.equal(rms(x), (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(torch.bfloat16))


def test_two_calls_before_one_backward_give_each_calls_gradients():
    # The core keeps one forward for backward; the earlier call's backward runs its forward again.
    torch.manual_seed(6)
    layer = te.Linear(64, 32)
    x1, x2 = torch.randn(8, 64, requires_grad=True), torch.randn(8, 64, requires_grad=True)
    with te.autocast(recipe=te_recipe.Float8CurrentScaling()):
        (layer(x1).sum() + 2 * layer(x2).sum()).backward()
    grads = (x1.grad.clone(), x2.grad.clone(), layer.weight.grad.clone())
    layer.weight.grad = None
    separate = []
    for x, factor in ((x1, 1), (x2, 2)):
        x.grad = None
        with te.autocast(recipe=te_recipe.Float8CurrentScaling()):
            (factor * layer(x).sum()).backward()
        separate.append(x.grad.clone())
    assert torch.equal(grads[0], separate[0]) and torch.equal(grads[1], separate[1])
    assert torch.allclose(grads[2], layer.weight.grad)  # the same two dW, summed by autograd in either order


def test_module_to_bfloat16_keeps_the_state():
    torch.manual_seed(7)
    layer = te.Linear(64, 32)
    x = torch.randn(16, 64)
    with te.autocast(recipe=te_recipe.DelayedScaling()):
        layer(x).sum().backward()
    scale = layer._unit.core.scaling_state("weight")["scale"]
    layer.to(torch.bfloat16)
    twin = te.Linear(64, 32, params_dtype=torch.bfloat16)
    twin.load_state_dict(layer.state_dict())
    xb = x.to(torch.bfloat16)
    with torch.no_grad(), te.autocast(recipe=te_recipe.DelayedScaling()):
        y = layer(xb)
        assert y.dtype == torch.bfloat16 and layer._unit.core.scaling_state("weight")["scale"] == scale
        assert torch.equal(y, twin(xb))
    assert layer.half()(x.half()).dtype == torch.float16  # float16 layers as TE's


def test_activation_dtype_is_tes():
    # TE's set_activation_dtype: torch autocast's dtype when on, else the input's. Without a recipe
    # the weights are cast to it, so float32 master weights under torch.autocast("cpu", bfloat16)
    # compute as a bf16 layer whose weights are the bf16 roundings of the masters. (A quantized
    # recipe quantizes the float32 master itself: test_torch_te_compat.py.)
    torch.manual_seed(3)
    master = te.Linear(64, 32, bias=True)
    with torch.no_grad():
        master.bias.normal_()
    bf16 = te.Linear(64, 32, bias=True, params_dtype=torch.bfloat16)
    with torch.no_grad():
        bf16.weight.copy_(master.weight)
        bf16.bias.copy_(master.bias)
    x = torch.randn(16, 64)
    for recipe in (None,):
        with torch.no_grad(), te.autocast(enabled=recipe is not None, recipe=recipe):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y_mixed = master(x)
            y_bf16 = bf16(x.to(torch.bfloat16))
        assert y_mixed.dtype == torch.bfloat16 and torch.equal(y_mixed, y_bf16)
    # (Outside torch autocast TE refuses an input dtype other than the parameters': test_torch_te_compat.py.)
    # dW and db come out in the activation dtype (TE without fuse_wgrad_accumulation), then take
    # the parameters' dtype: the float32 masters get the bf16 layer's gradients, widened.
    x.requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        master(x).float().sum().backward()
    bf16(x.detach().to(torch.bfloat16)).float().sum().backward()
    assert master.weight.grad.dtype == torch.float32 and x.grad.dtype == torch.float32
    assert torch.equal(master.weight.grad, bf16.weight.grad.float()) and torch.equal(master.bias.grad, bf16.bias.grad.float())


def test_deepcopy_and_pickle_keep_the_layer():
    import copy
    import io
    torch.manual_seed(8)
    model = torch.nn.Sequential(te.Linear(64, 32), te.LayerNormMLP(32, 64))
    x = torch.randn(16, 64)
    with te.autocast(recipe=te_recipe.DelayedScaling()):
        model(x).sum().backward()
    clone = copy.deepcopy(model)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer) if torch.__version__ < "2" else torch.load(buffer, weights_only=False)
    with torch.no_grad(), te.autocast(recipe=te_recipe.DelayedScaling()):
        y = model(x)
        assert torch.equal(clone(x), y) and torch.equal(loaded(x), y)
    assert clone[0]._unit.core is not model[0]._unit.core
