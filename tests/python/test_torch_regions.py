# Delayed scaling through nvfp4.torch follows TE's autocast regions (TE pytorch/quantization.py
# autocast exit -> reduce_and_update_fp8_tensors(forward=True) only with grad enabled;
# module/base.py: the backward update at the end of the region's first FP8 module's backward;
# base.py's recipe switch keeping scale and history). Expected scales come from TE's formula,
# scale = fl(fp8_max / amax) with amax the max of the history window (margin 0).
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402

Delayed = te_recipe.DelayedScaling


def state(layer, role):
    return layer._unit.core.scaling_state(role)


def make(seed=0, k=64, n=32):
    torch.manual_seed(seed)
    return te.Linear(k, n, bias=False)


def test_a_layer_called_twice_in_one_region_uses_one_scale():
    layer = make()
    x = torch.randn(16, 64)
    with te.autocast(recipe=Delayed()):  # a first step, so that the scales are not 1
        layer(x).sum().backward()
    with te.autocast(recipe=Delayed()):
        y1 = layer(x * 3)
        y2 = layer(x * 3)
    assert torch.equal(y1, y2)
    with te.autocast(recipe=Delayed()):
        y3 = layer(x * 3)  # the region's exit updated the scale from the amax of 3x
    assert not torch.equal(y1, y3)


def test_forward_scales_update_once_per_outermost_region_from_the_merged_amax():
    layer = make()
    x = torch.randn(16, 64)
    with te.autocast(recipe=Delayed(amax_history_len=4)):
        with te.autocast(recipe=Delayed(amax_history_len=4)):  # nested: nothing updates at the inner exit
            layer(x)
            layer(2 * x)
        assert state(layer, "input")["scale"] == 1.0
    amax = float((2 * x).abs().max())
    assert state(layer, "input")["scale"] == np.float32(448.0) / np.float32(amax)
    assert state(layer, "input")["amax_history"][-1] == np.float32(amax)


def test_backward_updates_the_gradient_scale_once():
    layer = make()
    x = torch.randn(16, 64, requires_grad=True)
    dy = torch.randn(16, 32) * 1e-3
    with te.autocast(recipe=Delayed()):
        y = layer(x)
    assert state(layer, "grad_output")["scale"] == 1.0
    y.backward(dy)
    assert state(layer, "grad_output")["scale"] == np.float32(57344.0) / np.float32(float(dy.abs().max()))


def test_evaluation_under_no_grad_merges_its_amax_into_the_next_step():
    layer = make()
    x = torch.randn(16, 64)
    recipe = Delayed(amax_history_len=4)
    with te.autocast(recipe=recipe):
        layer(x).sum().backward()
    scale = state(layer, "input")["scale"]
    with torch.no_grad(), te.autocast(recipe=recipe):
        layer(10 * x)  # recorded, not applied
    assert state(layer, "input")["scale"] == scale
    with te.autocast(recipe=recipe):
        layer(x).sum().backward()
    big = float((10 * x).abs().max())
    assert state(layer, "input")["amax_history"][-1] == np.float32(big)
    assert state(layer, "input")["scale"] == np.float32(448.0) / np.float32(big)


def test_a_new_margin_continues_from_the_kept_scale():
    layer, twin = make(1), make(1)
    x = torch.randn(16, 64)
    for module in (layer, twin):
        for _ in range(2):
            with te.autocast(recipe=Delayed()):
                module(x).sum().backward()
    kept = state(layer, "input")["scale"]
    assert kept != 1.0
    with te.autocast(recipe=Delayed(margin=1, amax_history_len=16)):
        y_new = layer(x)
    with te.autocast(recipe=Delayed()):
        y_old = twin(x)
    assert torch.equal(y_new, y_old)  # the first forward under the new recipe runs on the kept scale
    assert len(state(layer, "input")["amax_history"]) == 16  # the history zero-padded to the new length
    fresh = make(1)
    with te.autocast(recipe=Delayed(margin=1)):
        assert not torch.equal(fresh(x), y_new)


def test_a_region_without_quantization_keeps_the_delayed_state():
    # TE's set_meta_tensor runs only while FP8 is on: a high-precision region leaves the state.
    layer = make(2)
    x = torch.randn(16, 64)
    with te.autocast(recipe=Delayed()):
        layer(x).sum().backward()
    kept = state(layer, "weight")["scale"]
    assert kept != 1.0
    with te.autocast(enabled=False):
        layer(x)
    with torch.no_grad(), te.autocast(recipe=Delayed()):
        layer(x)
    assert state(layer, "weight")["scale"] == kept


def test_another_quantized_recipe_replaces_the_delayed_state():
    # TE's set_meta_tensor: a recipe state of another class is replaced by RecipeState.create, so
    # DelayedScaling -> Float8CurrentScaling -> DelayedScaling starts from scale 1 and a zero history.
    layer = make(2)
    x = torch.randn(16, 64)
    with te.autocast(recipe=Delayed()):
        layer(x).sum().backward()
    assert state(layer, "weight")["scale"] != 1.0
    with te.autocast(recipe=te_recipe.Float8CurrentScaling()):
        layer(x)
    with torch.no_grad(), te.autocast(recipe=Delayed()):
        layer(x)
    fresh = state(layer, "weight")
    assert fresh["scale"] == 1.0 and not any(fresh["amax_history"][1:])


def test_state_dict_carries_the_scaling_state():
    layer = make(3)
    x = torch.randn(16, 64)
    for _ in range(3):
        with te.autocast(recipe=Delayed(amax_history_len=8)):
            layer(x * (1 + torch.rand(1))).sum().backward()
    saved = layer.state_dict()
    assert "_extra_state" in saved
    restored = make(4)
    with torch.no_grad(), te.autocast(recipe=Delayed(amax_history_len=8)):
        restored(x)  # registers the recipe (TE creates its FP8 metadata on first use too)
    restored.load_state_dict(saved)
    for role in ("input", "weight", "grad_output"):
        assert state(restored, role)["scale"] == state(layer, role)["scale"]
        assert state(restored, role)["amax_history"] == state(layer, role)["amax_history"]
    with torch.no_grad(), te.autocast(recipe=Delayed(amax_history_len=8)):
        assert torch.equal(restored(x), layer(x))


def test_disabled_inner_region_runs_in_high_precision():
    layer = make(5)
    x = torch.randn(16, 64)  # TE's NVFP4: rows divisible by 16, RHT off for float32 activations
    with torch.no_grad():
        plain = layer(x)
        with te.autocast(recipe=te_recipe.NVFP4BlockScaling(disable_rht=True)):
            quantized = layer(x)
            with te.autocast(enabled=False):
                inner = layer(x)
            assert te.is_fp8_enabled()
        assert not te.is_fp8_enabled()
    assert torch.equal(inner, plain) and not torch.equal(quantized, plain)
