# Training through nvfp4.torch: an MLP of te.Linear layers learns under te.autocast(recipe=
# NVFP4BlockScaling()) with extras.optim.AdamW(state_dtype="float8_e5m2"); the optimizers against
# torch.optim.AdamW (the peer) and against Muon's defining property; the FP8 state's storage.
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402
from nvfp4.torch import extras  # noqa: E402


def test_mlp_trains_under_nvfp4_with_fp8_adamw_state():
    torch.manual_seed(0)
    teacher = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 32))
    x = torch.randn(128, 64)
    with torch.no_grad():
        target = teacher(x)
    model = torch.nn.Sequential(te.Linear(64, 128), torch.nn.GELU(), te.Linear(128, 32))
    optimizer = extras.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0, state_dtype="float8_e5m2")
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        # TE's NVFP4 (its RHT) needs bf16 activations: fp32 masters under torch autocast, as TE trains
        with torch.autocast("cpu", dtype=torch.bfloat16), te.autocast(recipe=te_recipe.NVFP4BlockScaling()):
            out = model(x)
        loss = torch.nn.functional.mse_loss(out.float(), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.5 * losses[0], losses
    state = optimizer.state[model[0].weight]
    assert state["exp_avg"].dtype == torch.uint8 and state["exp_avg"].numel() == 128 * 64
    assert state["exp_avg_scale_inv"].numel() == 128 * 64 // 128


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_adamw_with_float32_state_is_torchs_adamw(dtype):
    torch.manual_seed(1)
    p_ours = torch.nn.Parameter(torch.randn(40, 30).to(dtype))
    p_ref = torch.nn.Parameter(p_ours.detach().float().clone())
    ours = extras.optim.AdamW([p_ours], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    ref = torch.optim.AdamW([p_ref], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for _ in range(5):
        g = torch.randn(40, 30)
        p_ours.grad, p_ref.grad = g.to(dtype), g.to(dtype).float()
        ours.step()
        ref.step()
        if dtype == torch.bfloat16:  # torch's reference in fp32, rounded as our bf16 parameter is
            with torch.no_grad():
                p_ref.copy_(p_ref.to(torch.bfloat16).float())
    torch.testing.assert_close(p_ours.detach().float(), p_ref.detach(), rtol=1e-6, atol=0)


@pytest.mark.parametrize("state_dtype,rel", [("bfloat16", 2 ** -8), ("float8_e4m3", 2 ** -3), ("float8_e5m2", 2 ** -2)])
def test_low_precision_state_stays_close_to_float32(state_dtype, rel):
    torch.manual_seed(2)
    p32 = torch.nn.Parameter(torch.randn(64, 256))
    plow = torch.nn.Parameter(p32.detach().clone())
    o32 = extras.optim.AdamW([p32], lr=1e-3)
    olow = extras.optim.AdamW([plow], lr=1e-3, state_dtype=state_dtype)
    g = torch.randn(64, 256)
    g[:, :128] *= 1e-3  # blocks of very different magnitudes
    p32.grad, plow.grad = g.clone(), g.clone()
    o32.step()
    olow.step()
    m32 = o32.state[p32]["exp_avg"].view(torch.float32).reshape(64, 256)
    stored = olow.state[plow]
    if state_dtype == "bfloat16":
        mlow = stored["exp_avg"].view(torch.bfloat16).float().reshape(64, 256)
    else:
        from nvfp4.torch.extras.optim import _load
        mlow = _load(stored, "exp_avg", (64, 256), state_dtype)
    block_amax = m32.reshape(-1, 128).abs().amax(dim=1, keepdim=True).expand(-1, 128).reshape(64, 256)
    assert torch.all((mlow - m32).abs() <= rel * block_amax)
    assert torch.all(torch.isfinite(plow)) and not torch.equal(plow, p32.detach() * 0)
    # The first update is m / sqrt(v) ~ sign(g) wherever g is not tiny: the stored sqrt(v) keeps it.
    torch.testing.assert_close(plow.detach(), p32.detach(), rtol=0, atol=1e-3 * rel * 4)


def test_muon_orthogonalises_the_update():
    torch.manual_seed(3)
    p = torch.nn.Parameter(torch.zeros(32, 64))
    muon = extras.optim.Muon([p], lr=1.0, momentum=0.0, nesterov=False, state_dtype="float8_e4m3")
    p.grad = torch.randn(32, 64)
    muon.step()
    singular = torch.linalg.svdvals(-p.detach())
    assert singular.min() > 0.5 and singular.max() < 1.5  # Newton-Schulz pushes all singular values towards 1
    with pytest.raises(ValueError, match="AdamW"):
        bias = torch.nn.Parameter(torch.zeros(8))
        bias.grad = torch.ones(8)
        extras.optim.Muon([bias]).step()


def test_optimizer_state_dict_round_trips():
    torch.manual_seed(4)
    model = te.Linear(32, 16, params_dtype=torch.bfloat16)
    opt = extras.optim.AdamW(model.parameters(), state_dtype="float8_e4m3")
    model(torch.randn(4, 32, dtype=torch.bfloat16)).float().sum().backward()
    opt.step()
    saved = opt.state_dict()
    other = extras.optim.AdamW(model.parameters(), state_dtype="float8_e4m3")
    other.load_state_dict(saved)
    for p in model.parameters():
        for key, value in opt.state[p].items():
            loaded = other.state[p][key]
            assert (value == loaded) if not torch.is_tensor(value) else torch.equal(value, loaded), key


def test_the_docs_from_pytorch_example_runs():
    import pathlib
    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    start = text.index("```python", text.index("## From PyTorch")) + len("```python\n")
    scope = {}
    exec(text[start:text.index("```", start)], scope)  # noqa: S102 - the documentation's own example
    assert math.isfinite(scope["loss"].item())
