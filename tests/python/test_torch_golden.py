# The H100's own Linear step (golden kind linear_fp8_h100: torch's FP8 casts and cuBLASLt FP8 GEMMs
# composed as TE's Float8CurrentScaling Linear): a te.Linear with bf16 parameters under
# te.autocast(recipe=Float8CurrentScaling()) gives y, x.grad and weight.grad bit for bit.
import json
import os
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402


def linear_cases():
    directory = os.environ.get("NVFP4_GOLDEN_DIR") or os.environ.get("NVFP4_DEFAULT_GOLDEN_DIR")
    if not directory or not (pathlib.Path(directory) / "manifest.json").exists():
        return None, []
    directory = pathlib.Path(directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    return directory, [c for c in manifest["cases"] if c["kind"] == "linear_fp8_h100"]


DIRECTORY, CASES = linear_cases()


def bf16_tensor(bits_u16):
    return torch.from_numpy(np.ascontiguousarray(bits_u16).view(np.int16)).view(torch.bfloat16)


@pytest.mark.skipif(not CASES, reason="the golden archive holds no linear_fp8_h100 cases (set NVFP4_GOLDEN_DIR to a directory that does)")
@pytest.mark.parametrize("index", range(len(CASES)))
def test_te_linear_reproduces_the_h100(index):
    case = CASES[index]
    load = lambda key: np.load(DIRECTORY / case[key])  # noqa: E731
    m, k, n = case["m"], case["k"], case["n"]
    layer = te.Linear(k, n, bias=False, params_dtype=torch.bfloat16)
    with torch.no_grad():
        layer.weight.copy_(bf16_tensor(load("w_bf16")))
    x = bf16_tensor(load("x_bf16")).clone().requires_grad_()
    with te.autocast(enabled=True, recipe=te_recipe.Float8CurrentScaling()):
        y = layer(x)
    y.backward(bf16_tensor(load("dy_bf16")))
    as_bits = lambda t: t.detach().contiguous().view(torch.int16).numpy().view(np.uint16)  # noqa: E731
    assert y.shape == (m, n) and np.array_equal(as_bits(y), load("y_bf16")), "y"
    assert np.array_equal(as_bits(x.grad), load("dx_bf16")), "x.grad"
    assert np.array_equal(as_bits(layer.weight.grad), load("dw_bf16")), "weight.grad"
