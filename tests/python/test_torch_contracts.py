# torch's contracts kept by nvfp4.torch's layers (issue 39 items 2, 5, 9 and the minor ones): each
# call's backward differentiates its own forward whatever calls, recipes, dtypes or in-place
# changes came between; retain_graph and create_graph behave as for torch.nn.Linear (a gradient
# under create_graph=True has a grad_fn, and differentiating it again raises); sizes and recipe
# fields are checked before anything is allocated.
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402
from nvfp4.torch.module import base as te_base  # noqa: E402


# ---- sizes ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [64.7, 64.0, "64", True, None, np.float32(8)])
def test_a_size_that_is_not_an_int_is_a_type_error(value):
    """TE hands its sizes to torch.empty, whose error for a float or a str is a TypeError."""
    if not isinstance(value, bool):  # torch.empty (and so TE, and torch.nn.Linear) reads True as 1; refused here
        with pytest.raises(TypeError):
            torch.empty(3, value)  # the peer's behaviour
    with pytest.raises(TypeError, match="in_features must be an int"):
        te_base.size_argument("Linear", "in_features", value)


@pytest.mark.parametrize("make", [lambda v: te.Linear(v, 8), lambda v: te.Linear(8, v), lambda v: te.LayerNormLinear(v, 8),
                                  lambda v: te.LayerNormMLP(v, 16), lambda v: te.LayerNormMLP(16, v)])
@pytest.mark.parametrize("value", [64.7, "64", True])
def test_layers_refuse_sizes_that_are_not_ints(make, value):
    """te.Linear(64.7) / ("64") / (True) were taken as 64 / 64 / 1."""
    with pytest.raises(TypeError, match="must be an int"):
        make(value)


@pytest.mark.parametrize("sizes", [(0, 16), (16, 0), (-4, 16)])
def test_layernorm_mlp_refuses_non_positive_sizes(sizes):
    """LayerNormMLP(0, 16) was accepted (an empty layer norm and fc1)."""
    with pytest.raises(ValueError, match="must be positive"):
        te.LayerNormMLP(*sizes)


def test_int_like_sizes_are_taken_and_non_positive_ones_refused():
    assert te_base.size_argument("Linear", "in_features", np.int64(48)) == 48
    assert type(te_base.size_argument("Linear", "in_features", np.int64(48))) is int
    for bad in (0, -3):
        with pytest.raises(ValueError, match="hidden_size must be positive"):
            te_base.size_argument("LayerNormMLP", "hidden_size", bad)


# ---- recipe fields ----------------------------------------------------------------------------------

@pytest.mark.parametrize("length,error", [(10 ** 9, ValueError), (2 ** 20 + 1, ValueError), (0, ValueError),
                                          (16.0, TypeError), (True, TypeError)])
def test_an_amax_history_length_out_of_bounds_is_refused_at_construction(length, error):
    """10**9 was accepted, and the first region allocated histories until the process was killed
    (22 GB). The bound is the library's delayed_scaling::max_amax_history_len, 2**20."""
    with pytest.raises(error, match="amax_history_len"):
        te_recipe.DelayedScaling(amax_history_len=length)
    assert te_recipe.DelayedScaling(amax_history_len=2 ** 20).amax_history_len == 2 ** 20
    assert te_recipe.DelayedScaling(amax_history_len=np.int64(16)).amax_history_len == 16


# ---- each call's backward is its own forward's ------------------------------------------------------

NVFP4_NO_SR = dict(disable_stochastic_rounding=True)  # so a replay's seeds do not depend on the backward count


def _recipe(name):
    return {"none": None, "current": te_recipe.Float8CurrentScaling(), "block": te_recipe.Float8BlockScaling(),
            "mxfp8": te_recipe.MXFP8BlockScaling(), "nvfp4": te_recipe.NVFP4BlockScaling(**NVFP4_NO_SR)}[name]


def _call(layer, x, recipe):
    """A bf16 call of a float32 layer runs under torch autocast (TE refuses the dtype mix outside it)."""
    mixed = x.dtype == torch.bfloat16 and layer.params_dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed), te.autocast(enabled=recipe is not None, recipe=recipe):
        return layer(x)


def _grads(y, layer, x, dy, **kwargs):
    return torch.autograd.grad(y, [x, layer.weight, layer.bias], dy, **kwargs)


def _alone(layer, x, dy, recipe):
    """The call replayed in isolation on a copy of the layer: forward, then its backward at once."""
    ref = te.Linear(layer.in_features, layer.out_features, params_dtype=layer.params_dtype)
    ref.load_state_dict(layer.state_dict())
    xr = x.detach().clone().requires_grad_(True)
    y = _call(ref, xr, recipe)
    return (y, *_grads(y, ref, xr, dy))


def _same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


@pytest.mark.parametrize("backward_order", ["first_call_first", "second_call_first"])
@pytest.mark.parametrize("first,second", [
    (("current", torch.float32), ("none", torch.float32)),      # a second call outside any region
    (("mxfp8", torch.float32), ("nvfp4", torch.bfloat16)),      # a second call under another recipe (TE's RHT: bf16)
    (("none", torch.float32), ("none", torch.bfloat16)),        # an fp32 call, then a bf16 call
    (("current", torch.bfloat16), ("block", torch.float32)),
    (("nvfp4", torch.bfloat16), ("nvfp4", torch.bfloat16)),     # the same recipe twice
])
def test_each_backward_differentiates_its_own_forward(first, second, backward_order):
    torch.manual_seed(1)
    layer = te.Linear(64, 32)
    calls = []
    for name, dtype in (first, second):
        x = torch.randn(32, 64).to(dtype).requires_grad_(True)
        dy = torch.randn(32, 32).to(dtype)
        expected = _alone(layer, x, dy, _recipe(name))
        calls.append((x, dy, _call(layer, x, _recipe(name)), expected))
    order = calls if backward_order == "first_call_first" else calls[::-1]
    for x, dy, y, expected in order:
        got = (y, *_grads(y, layer, x, dy))
        for what, g, e in zip(("y", "dx", "dw", "db"), got, expected):
            assert _same(g, e), what


def test_an_input_changed_in_place_before_backward_raises_as_torch_does():
    layer, reference = te.Linear(32, 16), torch.nn.Linear(32, 16)
    for module in (reference, layer):
        x = torch.randn(8, 32, requires_grad=True)
        h = x * 1.0  # a non-leaf, so it may be changed in place
        y = module(h)
        with torch.no_grad():
            h.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_a_weight_changed_in_place_before_backward_raises_as_torch_does():
    """(torch.nn.Linear saves W only when dX is wanted; te.Linear, as TE's, always saves it.)"""
    for module in (torch.nn.Linear(32, 16), te.Linear(32, 16)):
        x = torch.randn(8, 32, requires_grad=True)
        y = _call(module, x, _recipe("current") if isinstance(module, te.Linear) else None)
        with torch.no_grad():
            module.weight.mul_(0.5)  # e.g. an optimizer step between forward and backward
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


@pytest.mark.parametrize("recipe_name", ["none", "current", "nvfp4"])
def test_a_second_backward_needs_retain_graph_as_for_torch_linear(recipe_name):
    torch.manual_seed(2)
    dtype = torch.bfloat16 if recipe_name == "nvfp4" else torch.float32  # TE's NVFP4 RHT takes bf16 only
    layer = te.Linear(32, 16, params_dtype=dtype)
    x = torch.randn(16, 32, dtype=dtype, requires_grad=True)  # NVFP4's Hadamard transform takes 16 rows at a time
    y = _call(layer, x, _recipe(recipe_name))
    y.sum().backward()
    once = x.grad.clone()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()  # was accepted, doubling the gradients
    assert torch.equal(x.grad, once)
    x.grad = None
    y = _call(layer, x, _recipe(recipe_name))
    y.sum().backward(retain_graph=True)
    first = x.grad.clone()
    y.sum().backward()
    assert torch.equal(x.grad, first + first)


def _gemm_nodes(y):
    """The autograd nodes of the emulated GEMM calls behind y."""
    found, stack, seen = [], [y.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if type(node).__name__ == "_LinearFunctionBackward":
            found.append(node)
        stack.extend(n for n, _ in node.next_functions)
    return found


def test_a_backward_without_retain_graph_releases_the_saved_forward():
    """As torch frees saved tensors after a backward that does not keep the graph, the call's
    SavedForward (its quantized copies) is dropped then, not when the loss is next reassigned."""
    layer = te.Linear(32, 32)
    y = _call(layer, torch.randn(32, 32, requires_grad=True), _recipe("mxfp8"))  # MXFP8: dims of 32, as TE
    (node,) = _gemm_nodes(y)
    y.sum().backward(retain_graph=True)
    assert node.saved is not None
    y.sum().backward()
    assert node.saved is None


def test_a_gradient_under_create_graph_cannot_be_silently_constant():
    """torch.nn.Linear's gradient under create_graph=True depends on W (a gradient penalty trains
    it); here the gradient has a grad_fn, and differentiating it raises (never silently zero)."""
    torch.manual_seed(3)
    layer = te.Linear(32, 16)
    x = torch.randn(8, 32, requires_grad=True)
    y = _call(layer, x, _recipe("current"))
    (gx,) = torch.autograd.grad(y.pow(2).sum(), x, create_graph=True)
    assert gx.grad_fn is not None and gx.requires_grad
    plain = torch.autograd.grad(_call(layer, x, _recipe("current")).pow(2).sum(), x)[0]
    assert torch.equal(gx.detach(), plain)  # the same first-order bits
    with pytest.raises(RuntimeError, match="cannot be differentiated again"):
        gx.pow(2).sum().backward()


def test_a_recipe_refused_at_first_use_changes_nothing():
    """A DelayedScaling whose history length was set out of bounds after construction is refused
    by the first region that uses it, and leaves the layer as it was: before, it became the
    layer's first DelayedScaling, whose margin every later DelayedScaling then ran with."""
    torch.manual_seed(5)
    layer, fresh = te.Linear(32, 16), te.Linear(32, 16)
    fresh.load_state_dict(layer.state_dict())
    bad = te_recipe.DelayedScaling()
    bad.amax_history_len = 10 ** 9
    x = torch.randn(16, 32)
    with pytest.raises(ValueError, match="amax_history_len"):
        with te.autocast(recipe=bad):
            layer(x)
    good = te_recipe.DelayedScaling(margin=2, amax_history_len=4)
    for module in (layer, fresh):
        for _ in range(2):
            with te.autocast(recipe=good):
                module(x).sum().backward()
    assert torch.equal(layer.weight.grad, fresh.weight.grad)
    with te.autocast(recipe=good), torch.no_grad():
        assert torch.equal(layer(x), fresh(x))


# ---- bfloat16 tensors reach the core as their bits -------------------------------------------------

class _Recording:
    """A LinearCore stand-in that records the numpy dtypes each call receives."""

    def __init__(self, core):
        self.core, self.seen = core, []

    def __getattr__(self, name):
        target = getattr(self.core, name)
        if name not in ("forward", "infer", "backward"):
            return target

        def call(*args, **kwargs):
            self.seen.append((name, [str(a.dtype) for a in args if isinstance(a, np.ndarray)]))
            return target(*args, **kwargs)
        return call


def test_bf16_tensors_are_passed_as_their_bits():
    """A bf16 layer's parameters, inputs and output gradients go to the core as uint16 bits,
    without a float32 copy (issue 44 item 4; test_linear_core.py checks that bits and float32
    values give the same results), dW comes back as bf16 bits (issue 41 item 2: no float32 dW per
    step), and the results are the call's replay."""
    torch.manual_seed(6)
    layer = te.Linear(32, 16, params_dtype=torch.bfloat16)
    widened = te.Linear(32, 16, params_dtype=torch.bfloat16)
    widened.load_state_dict(layer.state_dict())
    x = torch.randn(16, 32).to(torch.bfloat16).requires_grad_(True)
    dy = torch.randn(16, 16).to(torch.bfloat16)
    layer(x)  # makes the bf16 core
    recording = _Recording(layer._unit.core)
    layer._unit.core = recording
    y = _call(layer, x, _recipe("current"))
    got = _grads(y, layer, x, dy)
    with torch.no_grad():
        _call(layer, x, _recipe("current"))
    assert recording.seen == [("forward", ["uint16", "uint16", "uint16"]), ("backward", ["uint16", "uint16", "float32"]),
                              ("infer", ["uint16", "uint16", "uint16"])]
    expected = _alone(widened, x, dy, _recipe("current"))
    assert _same(y, expected[0]) and all(_same(g, e) for g, e in zip(got, expected[1:]))
