# te.GroupedLinear (MoE experts): TE's grouped GEMM quantizes each expert's rows with that expert's
# own quantizers and runs one GEMM per expert, so every expert must equal a separate te.Linear
# holding its weight (same seed) bit for bit, under every recipe, forward and backward, across
# steps (delayed scaling's state included) and with experts that get no tokens.
import pytest

torch = pytest.importorskip("torch")

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


def separate_linears(grouped, seed):
    """One te.Linear per expert with the expert's weight and bias (and seed + i, as GroupedLinear)."""
    layers = []
    for i in range(grouped.num_gemms):
        layer = te.Linear(grouped.in_features, grouped.out_features, bias=grouped.use_bias,
                          params_dtype=grouped.params_dtype, seed=seed + i)
        with torch.no_grad():
            layer.weight.copy_(getattr(grouped, f"weight{i}"))
            if grouped.use_bias:
                layer.bias.copy_(getattr(grouped, f"bias{i}"))
        layers.append(layer)
    return layers


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(RECIPES))
def test_each_expert_is_a_separate_linear_bit_for_bit(name, dtype):
    torch.manual_seed(0)
    k, n, seed = 64, 32, 5
    grouped = te.GroupedLinear(4, k, n, params_dtype=dtype, seed=seed)
    layers = separate_linears(grouped, seed)
    # TE's NVFP4 RHT takes bf16 only: float32 experts run it under torch autocast (TE's mixed precision)
    mixed = name == "nvfp4" and dtype == torch.float32
    for step, splits in enumerate(([32, 0, 64, 32], [0, 32, 32, 64])):  # an expert without tokens each step
        recipe = RECIPES[name]()
        x = torch.randn(sum(splits), k).to(dtype).requires_grad_()
        dy = torch.randn(sum(splits), n).to(torch.bfloat16 if mixed else dtype)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed), te.autocast(enabled=recipe is not None, recipe=recipe):
            y = grouped(x, splits)
        y.backward(dy)
        xs = [part.detach().clone().requires_grad_() for part in torch.split(x.detach(), splits)]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed), te.autocast(enabled=recipe is not None, recipe=recipe):
            ys = [layer(part) for layer, part in zip(layers, xs)]
        torch.autograd.backward(ys, list(torch.split(dy, splits)))
        assert y.dtype == (torch.bfloat16 if mixed else dtype) and y.shape == (sum(splits), n)
        assert torch.equal(y, torch.cat(ys)), f"step {step}"
        assert torch.equal(x.grad, torch.cat([part.grad for part in xs])), f"step {step}"
        for i, layer in enumerate(layers):
            assert torch.equal(getattr(grouped, f"weight{i}").grad, layer.weight.grad), f"step {step} expert {i}"
            assert torch.equal(getattr(grouped, f"bias{i}").grad, layer.bias.grad), f"step {step} expert {i}"
        empty = splits.index(0)
        assert torch.count_nonzero(getattr(grouped, f"weight{empty}").grad) == 0
        grouped.zero_grad()
        for layer in layers:
            layer.zero_grad()


def test_parameters_are_tes_and_m_splits_may_be_a_tensor():
    torch.manual_seed(0)
    grouped = te.GroupedLinear(3, 16, 8)
    assert [name for name, _ in grouped.named_parameters()] == ["weight0", "bias0", "weight1", "bias1", "weight2", "bias2"]
    assert list(grouped.state_dict()) == ["weight0", "bias0", "weight1", "bias1", "weight2", "bias2", "_extra_state"]
    assert [name for name, _ in te.GroupedLinear(2, 16, 8, bias=False).named_parameters()] == ["weight0", "weight1"]
    x = torch.randn(6, 16)
    assert torch.equal(grouped(x, torch.tensor([1, 2, 3])), grouped(x, [1, 2, 3]))
    assert torch.equal(grouped(x.view(2, 3, 16), [1, 2, 3]), grouped(x, [1, 2, 3]))
    y, biases = te.GroupedLinear(3, 16, 8, return_bias=True)(x, [1, 2, 3])
    assert len(biases) == 3 and biases[0].shape == (8,)


def test_state_dict_round_trip_keeps_each_experts_delayed_scaling_state():
    torch.manual_seed(0)
    grouped = te.GroupedLinear(2, 32, 32)
    for _ in range(2):
        with te.autocast(recipe=te_recipe.DelayedScaling()):
            grouped(torch.randn(64, 32) * 3, [32, 32]).sum().backward()
    copy = te.GroupedLinear(2, 32, 32)
    copy.load_state_dict(grouped.state_dict())
    x = torch.randn(64, 32)
    with torch.no_grad(), te.autocast(recipe=te_recipe.DelayedScaling()):
        assert torch.equal(copy(x, [32, 32]), grouped(x, [32, 32]))


def test_bad_splits_and_arguments_raise_tes_messages():
    grouped = te.GroupedLinear(2, 16, 8)
    x = torch.randn(4, 16)
    with pytest.raises(ValueError, match=r"Shape of splits tensor \(\(3,\)\) does not match number of GEMMs \(2\)"):
        grouped(x, [1, 1, 2])
    with pytest.raises(ValueError, match="add up to 3 rows but the input has 4"):
        grouped(x, [1, 2])
    with pytest.raises(ValueError, match="not compatible with weight tensor"):
        grouped(torch.randn(4, 8), [2, 2])
    with pytest.raises(ValueError, match="Userbuffer"):
        te.GroupedLinear(2, 16, 8, ub_overlap_rs=True)
    with pytest.raises(ValueError, match="single_grouped_weight"):
        te.GroupedLinear(2, 16, 8, single_grouped_weight=True)
