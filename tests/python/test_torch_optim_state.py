# extras.optim's state contracts (issue 39 items 1 and 7): the state round-trips through
# state_dict / load_state_dict and torch.save / torch.load bit for bit for every state dtype, so a
# training run saved mid-way and resumed reproduces the uninterrupted run bit for bit under every
# recipe; state_dtype may change between steps; Muon leaves a parameter with no elements alone; and
# step() checks every group, parameter and gradient (and, FP8 state, the new moments' finiteness)
# before it changes anything.
import io

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4  # noqa: E402
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402
from nvfp4.torch import extras  # noqa: E402

STATE_DTYPES = ["float32", "bfloat16", "float8_e4m3", "float8_e5m2"]
RECIPES = {
    "none": None,
    "delayed": te_recipe.DelayedScaling,
    "current": te_recipe.Float8CurrentScaling,
    "block": te_recipe.Float8BlockScaling,
    "mxfp8": te_recipe.MXFP8BlockScaling,
    "nvfp4": te_recipe.NVFP4BlockScaling,
}


def _bits(t):
    """A tensor's dtype, shape and bytes (NaN-safe, exact comparison)."""
    return t.dtype, tuple(t.shape), t.detach().contiguous().reshape(-1).view(torch.uint8).tolist()


def _same_state(a, b):
    assert set(a) == set(b)
    for key in a:
        if torch.is_tensor(a[key]):
            assert torch.is_tensor(b[key]) and _bits(a[key]) == _bits(b[key]), key
        else:
            assert a[key] == b[key] and type(a[key]) is type(b[key]), key


def _through_torch_save(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    if int(torch.__version__.split(".")[0]) >= 2:
        return torch.load(buffer, weights_only=True)  # torch 2.6+'s default; 1.13's weights-only reader has no floats
    return torch.load(buffer)


def _optimizers(kind, params, state_dtype):
    """AdamW over every parameter, or Muon over the matrices and AdamW over the rest."""
    if kind == "adamw":
        return [extras.optim.AdamW(params, lr=1e-2, weight_decay=0.1, state_dtype=state_dtype)]
    matrices = [p for p in params if p.dim() >= 2]
    others = [p for p in params if p.dim() < 2]
    return [extras.optim.Muon(matrices, lr=1e-2, weight_decay=0.1, state_dtype=state_dtype),
            extras.optim.AdamW(others, lr=1e-2, state_dtype=state_dtype)]


def _model(seed, dtype):
    torch.manual_seed(seed)
    return torch.nn.Sequential(te.LayerNormLinear(32, 64, params_dtype=dtype), torch.nn.GELU(),
                               te.Linear(64, 32, params_dtype=dtype))


def _train(model, optimizers, recipe, steps, first_step):
    losses = []
    for step in range(first_step, first_step + steps):
        g = torch.Generator().manual_seed(1000 + step)  # the batch of a step does not depend on the run
        # TE-legal: the model's dtype (TE refuses a dtype mix outside torch autocast), 32 rows (MXFP8's blocks)
        x = torch.randn(32, 32, generator=g).to(next(model.parameters()).dtype)
        target = torch.randn(32, 32, generator=g)
        for opt in optimizers:
            opt.zero_grad()
        with te.autocast(enabled=recipe is not None, recipe=recipe):
            loss = (model(x).float() - target).pow(2).mean()
        loss.backward()
        for opt in optimizers:
            opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("state_dtype", STATE_DTYPES)
@pytest.mark.parametrize("kind", ["adamw", "muon"])
@pytest.mark.parametrize("param_dtype", [torch.float32, torch.bfloat16])
def test_state_round_trips_bit_for_bit(state_dtype, kind, param_dtype):
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(24, 40).to(param_dtype)), torch.nn.Parameter(torch.randn(300).to(param_dtype)),
              torch.nn.Parameter(torch.randn(5, 7).to(param_dtype))]
    clones = [torch.nn.Parameter(p.detach().clone()) for p in params]
    opts, resumed = _optimizers(kind, params, state_dtype), _optimizers(kind, clones, state_dtype)
    for _ in range(3):
        for p, c in zip(params, clones):
            p.grad = torch.randn(p.shape).to(param_dtype)
            c.grad = p.grad.clone()
        for opt in opts:
            opt.step()
    for opt, other in zip(opts, resumed):
        other.load_state_dict(_through_torch_save(opt.state_dict()))
        for p, c in zip(opt.param_groups[0]["params"], other.param_groups[0]["params"]):
            _same_state(opt.state[p], other.state[c])
    with torch.no_grad():
        for p, c in zip(params, clones):
            c.copy_(p)
    for p, c in zip(params, clones):  # the next step from the restored state: the same bits
        p.grad = torch.randn(p.shape).to(param_dtype)
        c.grad = p.grad.clone()
    for opt, other in zip(opts, resumed):
        opt.step()
        other.step()
    for p, c in zip(params, clones):
        assert _bits(p) == _bits(c)


@pytest.mark.parametrize("state_dtype", STATE_DTYPES)
@pytest.mark.parametrize("recipe_name", sorted(RECIPES))
def test_resumed_training_is_the_uninterrupted_run(recipe_name, state_dtype):
    recipe = None if RECIPES[recipe_name] is None else RECIPES[recipe_name]()
    kind = "muon" if recipe_name in ("nvfp4", "delayed") else "adamw"
    model = _model(0, torch.bfloat16)
    opts = _optimizers(kind, list(model.parameters()), state_dtype)
    uninterrupted = _train(model, opts, recipe, 6, 0)

    half = _model(0, torch.bfloat16)
    half_opts = _optimizers(kind, list(half.parameters()), state_dtype)
    first = _train(half, half_opts, recipe, 3, 0)
    checkpoint = _through_torch_save({"model": half.state_dict(), "optimizers": [o.state_dict() for o in half_opts]})
    del half, half_opts

    resumed = _model(7, torch.bfloat16)  # another initialisation: everything must come from the checkpoint
    resumed.load_state_dict(checkpoint["model"])
    resumed_opts = _optimizers(kind, list(resumed.parameters()), state_dtype)
    for opt, saved in zip(resumed_opts, checkpoint["optimizers"]):
        opt.load_state_dict(saved)
    second = _train(resumed, resumed_opts, recipe, 3, 3)

    assert first + second == uninterrupted
    for (name, a), (_, b) in zip(model.named_parameters(), resumed.named_parameters()):
        assert _bits(a) == _bits(b), name


def test_torch_1_13_load_state_dict_would_cast_the_state():
    """Why load_state_dict is our own: torch.optim.Optimizer's casts state tensors to the
    parameter's dtype by value. Restoring through it changes bf16 / FP8 state; ours does not."""
    p = torch.nn.Parameter(torch.randn(8, 16))
    opt = extras.optim.AdamW([p], state_dtype="bfloat16")
    p.grad = torch.randn(8, 16)
    opt.step()
    via_torch = extras.optim.AdamW([p], state_dtype="bfloat16")
    torch.optim.Optimizer.load_state_dict(via_torch, opt.state_dict())
    assert via_torch.state[p]["exp_avg"].dtype == torch.float32  # torch's cast (1.13 and 2.x)
    ours = extras.optim.AdamW([p], state_dtype="bfloat16")
    ours.load_state_dict(opt.state_dict())
    _same_state(ours.state[p], opt.state[p])


def test_older_bit_stored_state_loads():
    """State written by nvfp4 before its own load_state_dict (moments as int32 / int16 bits, FP8
    decode scales as int32 bits) loads as the values it held."""
    torch.manual_seed(5)
    p = torch.nn.Parameter(torch.randn(4, 64))
    for state_dtype, bits in (("float32", torch.int32), ("bfloat16", torch.int16)):
        m, v = torch.randn(4, 64).to(torch.bfloat16).float(), torch.rand(4, 64).to(torch.bfloat16).float()
        wide = {torch.int32: torch.float32, torch.int16: torch.bfloat16}[bits]
        value = {"step": 2, "exp_avg": m.to(wide).view(bits), "exp_avg_sq": v.to(wide).view(bits)}
        opt = extras.optim.AdamW([p], state_dtype=state_dtype)
        saved = opt.state_dict()
        saved["state"] = {0: value}
        opt.load_state_dict(saved)
        assert torch.equal(opt.state[p]["exp_avg"].float(), m) and torch.equal(opt.state[p]["exp_avg_sq"].float(), v)
        assert opt.state[p]["step"] == 2


def test_a_state_that_does_not_fit_is_refused_and_nothing_changes():
    p = torch.nn.Parameter(torch.randn(8, 16))
    opt = extras.optim.AdamW([p], state_dtype="float8_e4m3")
    p.grad = torch.randn(8, 16)
    opt.step()
    before = {k: v.clone() if torch.is_tensor(v) else v for k, v in opt.state[p].items()}
    other = torch.nn.Parameter(torch.randn(8, 17))  # another shape
    bad = extras.optim.AdamW([other], state_dtype="float8_e4m3").state_dict()
    bad["state"] = {0: dict(opt.state_dict()["state"][0])}
    target = extras.optim.AdamW([other], lr=5.0, state_dtype="float8_e4m3")
    with pytest.raises(ValueError, match="does not fit"):
        target.load_state_dict(bad)
    assert target.param_groups[0]["lr"] == 5.0 and len(target.state) == 0
    truncated = opt.state_dict()
    truncated["state"] = {0: {k: v for k, v in truncated["state"][0].items() if k != "exp_avg_sq_sqrt_scale_inv"}}
    with pytest.raises(ValueError, match="missing"):
        extras.optim.AdamW([p], state_dtype="float8_e4m3").load_state_dict(truncated)
    _same_state(opt.state[p], before)


@pytest.mark.parametrize("old", STATE_DTYPES)
@pytest.mark.parametrize("new", STATE_DTYPES)
def test_state_dtype_may_change_between_steps(old, new):
    torch.manual_seed(6)
    p = torch.nn.Parameter(torch.randn(16, 32))
    opt = extras.optim.AdamW([p], lr=1e-2, state_dtype=old)
    p.grad = torch.randn(16, 32)
    opt.step()
    state = opt.state[p]
    # torch.optim.AdamW from the same moments, as the stored `old` state decodes them
    if old in ("float32", "bfloat16"):
        m, v = state["exp_avg"].float(), state["exp_avg_sq"].float()
    else:
        fmt = old[len("float8_"):]

        def decode(name):
            t = nvfp4.Fp8Tensor.from_bytes(fmt, state[name].reshape(1, -1).numpy(), state[name + "_scale_inv"].reshape(1, -1).numpy(),
                                           block="1x128")
            return torch.from_numpy(nvfp4.dequantize(t)).reshape(16, 32)
        m, v = decode("exp_avg"), decode("exp_avg_sq_sqrt").square()
    ref_p = torch.nn.Parameter(p.detach().clone())
    ref = torch.optim.AdamW([ref_p], lr=1e-2)
    ref.state[ref_p] = {"step": torch.tensor(1.0), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    g = torch.randn(16, 32)
    p.grad, ref_p.grad = g.clone(), g.clone()
    opt.param_groups[0]["state_dtype"] = new
    opt.step()  # was KeyError (the new storage's keys looked up in the old one's state)
    ref.step()
    torch.testing.assert_close(p.detach(), ref_p.detach(), rtol=1e-6, atol=0)
    expected = {"exp_avg", "exp_avg_sq"} if new in ("float32", "bfloat16") else \
        {"exp_avg", "exp_avg_scale_inv", "exp_avg_sq_sqrt", "exp_avg_sq_sqrt_scale_inv"}
    assert set(opt.state[p]) == expected | {"step", "state_dtype"} and opt.state[p]["state_dtype"] == new


@pytest.mark.parametrize("state_dtype", STATE_DTYPES)
def test_muon_leaves_a_parameter_without_elements_alone(state_dtype):
    torch.manual_seed(7)
    empties = [torch.nn.Parameter(torch.zeros(shape)) for shape in ((0, 8), (8, 0), (0, 0, 3), (3, 4, 0))]
    w, w_ref = torch.nn.Parameter(torch.randn(8, 8)), None
    w_ref = torch.nn.Parameter(w.detach().clone())
    opt = extras.optim.Muon(empties + [w], state_dtype=state_dtype)
    ref = extras.optim.Muon([w_ref], state_dtype=state_dtype)
    for e in empties:
        e.grad = torch.zeros(e.shape)
    w.grad = torch.randn(8, 8)
    w_ref.grad = w.grad.clone()
    opt.step()  # was: a reshape error on (0, -1) / a division by zero
    ref.step()
    assert _bits(w) == _bits(w_ref)
    assert all(e.numel() == 0 for e in empties)
    adam = extras.optim.AdamW(empties, state_dtype=state_dtype)
    adam.step()
    adam.load_state_dict(_through_torch_save(adam.state_dict()))
    adam.step()


# ---- step() is atomic ----------------------------------------------------------------------------

def _snapshot(params, opts):
    return ([_bits(p) for p in params],
            [{id(p): {k: (_bits(v) if torch.is_tensor(v) else v) for k, v in o.state[p].items()} for p in params if p in o.state}
             for o in opts])


def _stepped(make, state_dtype="float32"):
    """Two parameters after one good step (so every state entry exists)."""
    torch.manual_seed(8)
    params = [torch.nn.Parameter(torch.randn(16, 32)), torch.nn.Parameter(torch.randn(16, 32))]
    opt = make(params, state_dtype)
    for p in params:
        p.grad = torch.randn(16, 32)
    opt.step()
    return params, opt


_MAKERS = {"adamw": lambda ps, sd: extras.optim.AdamW(ps, state_dtype=sd), "muon": lambda ps, sd: extras.optim.Muon(ps, state_dtype=sd)}


@pytest.mark.parametrize("kind", sorted(_MAKERS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_a_parameter_of_another_dtype_changes_nothing(kind, dtype):
    params, opt = _stepped(_MAKERS[kind])
    bad = torch.nn.Parameter(torch.randn(16, 32, dtype=dtype))
    opt.add_param_group({"params": [bad]})
    bad.grad = torch.randn(16, 32, dtype=dtype)
    for p in params:
        p.grad = torch.randn(16, 32)
    before = _snapshot(params, [opt])
    with pytest.raises(TypeError, match="float32 or bfloat16"):
        opt.step()
    assert _snapshot(params, [opt]) == before and bad not in opt.state


@pytest.mark.parametrize("kind", sorted(_MAKERS))
def test_a_sparse_gradient_changes_nothing(kind):
    params, opt = _stepped(_MAKERS[kind])
    for p in params:
        p.grad = torch.randn(16, 32)
    params[1].grad = params[1].grad.to_sparse()
    before = _snapshot(params, [opt])
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()
    assert _snapshot(params, [opt]) == before


@pytest.mark.parametrize("kind,key,value,error", [
    ("adamw", "lr", -1.0, ValueError), ("adamw", "betas", (0.9, 1.0), ValueError), ("adamw", "eps", "tiny", TypeError),
    ("adamw", "weight_decay", float("nan"), ValueError), ("adamw", "state_dtype", "float16", ValueError),
    ("muon", "momentum", 1.5, ValueError), ("muon", "ns_steps", 0, ValueError), ("muon", "nesterov", "yes", TypeError),
    ("muon", "state_dtype", None, ValueError),
])
def test_a_bad_group_value_changes_nothing(kind, key, value, error):
    params, opt = _stepped(_MAKERS[kind])
    late = torch.nn.Parameter(torch.randn(16, 32))
    opt.add_param_group({"params": [late]})
    opt.param_groups[1][key] = value
    for p in params + [late]:
        p.grad = torch.randn(16, 32)
    before = _snapshot(params + [late], [opt])
    with pytest.raises(error):
        opt.step()
    assert _snapshot(params + [late], [opt]) == before


def test_muon_refuses_a_vector_before_changing_anything():
    params, opt = _stepped(_MAKERS["muon"])
    vector = torch.nn.Parameter(torch.randn(8))
    opt.add_param_group({"params": [vector]})
    for p in params + [vector]:
        p.grad = torch.ones(p.shape)
    before = _snapshot(params, [opt])
    with pytest.raises(ValueError, match="AdamW"):
        opt.step()
    assert _snapshot(params, [opt]) == before


@pytest.mark.parametrize("kind", sorted(_MAKERS))
@pytest.mark.parametrize("state_dtype", ["float8_e4m3", "float8_e5m2"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e22])
def test_a_gradient_fp8_state_cannot_hold_changes_nothing(kind, state_dtype, bad):
    params, opt = _stepped(_MAKERS[kind], state_dtype)
    if kind == "muon" and bad == 1e22:
        # Muon keeps no square: its momentum overflows float32 only when it is near float32's
        # maximum already and another such gradient comes (0.95 * 3e38 + 3e38 > 3.4e38).
        params[1].grad = torch.full((16, 32), 3e38)
        opt.step()
        for p in params:
            p.grad = torch.randn(16, 32)
        params[1].grad[3, 5] = 3e38
    else:
        for p in params:
            p.grad = torch.randn(16, 32)
        params[1].grad[3, 5] = bad
    before = _snapshot(params, [opt])
    with pytest.raises(ValueError, match="not finite.*nothing changed"):
        opt.step()
    assert _snapshot(params, [opt]) == before  # parameters, moments and step counts


@pytest.mark.parametrize("bad", [float("nan"), 1e22])
@pytest.mark.parametrize("state_dtype", ["float32", "bfloat16"])
def test_wide_state_follows_torch_adamw_on_extreme_gradients(state_dtype, bad):
    """With float32 / bfloat16 state a NaN or huge gradient does what torch.optim.AdamW does: NaN
    propagates, 1e22 (square overflows to Inf) leaves a finite parameter."""
    torch.manual_seed(9)
    p = torch.nn.Parameter(torch.randn(4, 8))
    ref_p = torch.nn.Parameter(p.detach().clone())
    ours, ref = extras.optim.AdamW([p], state_dtype=state_dtype), torch.optim.AdamW([ref_p], weight_decay=1e-2)
    g = torch.randn(4, 8)
    g[1, 2] = bad
    p.grad, ref_p.grad = g.clone(), g.clone()
    ours.step()
    ref.step()
    assert torch.equal(torch.isfinite(p), torch.isfinite(ref_p))
    torch.testing.assert_close(p.detach(), ref_p.detach(), rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("kind", sorted(_MAKERS))
def test_a_refused_first_step_leaves_no_state_behind(kind):
    params = [torch.nn.Parameter(torch.randn(16, 32)), torch.nn.Parameter(torch.randn(16, 32))]
    opt = _MAKERS[kind](params, "float8_e4m3")
    params[0].grad = torch.randn(16, 32)
    params[1].grad = torch.full((16, 32), float("nan"))
    with pytest.raises(ValueError, match="not finite"):
        opt.step()
    assert len(opt.state) == 0  # was: empty entries for the parameters planned before the refusal
