# nvfp4.torch's DelayedScaling follows TE's choice of update path: NVTE_UNFUSED_FP8_UPDATE=1 takes
# TE's Python update (pytorch/quantization.py reduce_and_update_fp8_tensors: the flag, read as
# bool(int(os.getenv(...)))), whose scale TE computes with torch.compile unless NVTE_TORCH_COMPILE=0
# (pytorch/jit.py jit_fuser), then eagerly. Expected scales: the eager one TE's unfused formula
# evaluated by hand in fp32, the compiled one torch.compile's on an H100
# (tests/recipes/data/te_unfused_update).
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402

Delayed = te_recipe.DelayedScaling


def test_fused_update_by_default(monkeypatch):
    monkeypatch.delenv("NVTE_UNFUSED_FP8_UPDATE", raising=False)
    assert te_recipe.to_library(Delayed()).unfused_update is False
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "0")
    assert te_recipe.to_library(Delayed()).unfused_update is False


def test_unfused_update_is_compiled_unless_torch_compile_is_off(monkeypatch):
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "1")
    monkeypatch.setenv("NVTE_TORCH_COMPILE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = te_recipe.to_library(Delayed())
    assert r.unfused_update is True and r.unfused_form == "torch_eager"
    monkeypatch.delenv("NVTE_TORCH_COMPILE")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = te_recipe.to_library(Delayed())
    assert r.unfused_update is True and r.unfused_form == "torch_compile_h100"


def test_unfused_form_names_are_checked():
    r = te_recipe.to_library(Delayed())
    with pytest.raises(ValueError, match="unfused_form must be one of torch_eager, torch_compile_h100"):
        r.unfused_form = "compiled"


def test_a_flag_that_is_no_integer_is_refused(monkeypatch):
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "yes")
    with pytest.raises(ValueError, match="NVTE_UNFUSED_FP8_UPDATE='yes' must be an integer"):
        te_recipe.to_library(Delayed())


def test_unfused_scale_through_a_layer(monkeypatch):
    # amax 0.9900729 (0x3F7D756B): eager torch's 448 * fl(1 / amax) = 452.49191 (the fused kernel's
    # fl(448 / amax) is 452.49194, an ulp apart). One step of a layer whose input amax is that value.
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "1")
    monkeypatch.setenv("NVTE_TORCH_COMPILE", "0")
    amax = np.uint32(0x3F7D756B).view(np.float32)
    x = torch.zeros(16, 32)
    x[3, 5] = float(amax)
    layer = te.Linear(32, 16, bias=False)
    with te.autocast(recipe=Delayed(amax_history_len=4)):
        layer(x).sum().backward()
    state = layer._unit.core.scaling_state("input")
    assert state["amax_history"][-1] == amax
    assert state["scale"] == np.float32(np.float32(1) / amax) * np.float32(448)
    assert state["scale"] != np.float32(448) / amax  # not the fused kernel's scale


@pytest.mark.parametrize("compiled", [False, True])
def test_compiled_and_eager_scales_through_a_layer(monkeypatch, compiled):
    # amax 1.2583127 (0x3FA11064): on an H100, eager torch's scale is 0x43B20423 (356.03232) and
    # torch.compile's 0x43B20424 (356.03235), the GPU's div.full.f32 reciprocal being an ulp above
    # IEEE's (tests/recipes/data/te_unfused_update, compiled_448_m0 / eager_448_m0).
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "1")
    monkeypatch.setenv("NVTE_TORCH_COMPILE", "1" if compiled else "0")
    amax = np.uint32(0x3FA11064).view(np.float32)
    x = torch.zeros(16, 32)
    x[7, 2] = -float(amax)
    layer = te.Linear(32, 16, bias=False)
    with te.autocast(recipe=Delayed(amax_history_len=2)):
        layer(x).sum().backward()
    state = layer._unit.core.scaling_state("input")
    assert np.float32(state["scale"]).view(np.uint32) == (0x43B20424 if compiled else 0x43B20423)
