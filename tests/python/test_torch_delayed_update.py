# nvfp4.torch's DelayedScaling follows TE's choice of update path: NVTE_UNFUSED_FP8_UPDATE=1 takes
# TE's Python update (pytorch/quantization.py reduce_and_update_fp8_tensors: the flag, read as
# bool(int(os.getenv(...)))), whose scale the library computes as eager torch does; TE compiles
# that function unless NVTE_TORCH_COMPILE=0 (pytorch/jit.py jit_fuser), a form the library does not
# reproduce, so it warns then. Expected scales: TE's unfused formula evaluated by hand in fp32.
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402

Delayed = te.recipe.DelayedScaling


def test_fused_update_by_default(monkeypatch):
    monkeypatch.delenv("NVTE_UNFUSED_FP8_UPDATE", raising=False)
    assert te.recipe.to_library(Delayed()).unfused_update is False
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "0")
    assert te.recipe.to_library(Delayed()).unfused_update is False


def test_unfused_update_eager_is_silent_and_compiled_warns(monkeypatch):
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "1")
    monkeypatch.setenv("NVTE_TORCH_COMPILE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert te.recipe.to_library(Delayed()).unfused_update is True
    monkeypatch.delenv("NVTE_TORCH_COMPILE")
    with pytest.warns(UserWarning, match="torch.compile"):
        assert te.recipe.to_library(Delayed()).unfused_update is True


def test_a_flag_that_is_no_integer_is_refused(monkeypatch):
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "yes")
    with pytest.raises(ValueError, match="NVTE_UNFUSED_FP8_UPDATE='yes' must be an integer"):
        te.recipe.to_library(Delayed())


def test_unfused_scale_through_a_layer(monkeypatch):
    # amax 0.9900729 (0x3F7D756B): eager torch's 448 * fl(1 / amax) = 452.49191 (the fused kernel's
    # fl(448 / amax) is 452.49194, an ulp apart). One step of a layer whose input amax is that value.
    monkeypatch.setenv("NVTE_UNFUSED_FP8_UPDATE", "1")
    monkeypatch.setenv("NVTE_TORCH_COMPILE", "0")
    amax = np.uint32(0x3F7D756B).view(np.float32)
    x = torch.zeros(16, 32)
    x[3, 5] = float(amax)
    layer = te.Linear(32, 16, bias=False)
    with te.fp8_autocast(fp8_recipe=Delayed(amax_history_len=4)):
        layer(x).sum().backward()
    state = layer._unit.core.scaling_state("input")
    assert state["amax_history"][-1] == amax
    assert state["scale"] == np.float32(np.float32(1) / amax) * np.float32(448)
    assert state["scale"] != np.float32(448) / amax  # not the fused kernel's scale
