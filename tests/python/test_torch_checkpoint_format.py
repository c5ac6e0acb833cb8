# A GEMM module's _extra_state in TransformerEngine's format, both ways. TE's side is built here
# independently of nvfp4's writer: stand-ins of TE's recipe classes are registered as
# transformer_engine.common.recipe, and the state is pickled as TE's module/base.py
# get_extra_state does (a dict of the recipe, delayed scaling's scale / amax_history tensors with
# GEMM g's input, weight, output in forward slots 3g..3g+2 and grad_output, grad_input in backward
# slots 2g, 2g+1, and extra_fp8_variables, pickle.dumps'd into a uint8 tensor); TE's
# set_extra_state is followed step by step to read what nvfp4 writes.
import dataclasses
import enum
import io
import pickle
import sys
import types
from typing import NamedTuple, Optional

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4  # noqa: E402
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as R  # noqa: E402
from nvfp4.torch.module import _te_extra_state  # noqa: E402

TE_MODULE = "transformer_engine.common.recipe"


def te_recipe_module():
    """Stand-ins of TE's recipe classes (TE's field names and defaults, common/recipe/__init__.py)."""
    class _FormatHelper(NamedTuple):
        max_fwd: float
        max_bwd: float

    class Format(enum.Enum):
        E2M1 = _FormatHelper(max_fwd=6, max_bwd=6)
        E4M3 = _FormatHelper(max_fwd=448, max_bwd=448)
        E5M2 = _FormatHelper(max_fwd=57344, max_bwd=57344)
        HYBRID = _FormatHelper(max_fwd=448, max_bwd=57344)

    @dataclasses.dataclass(frozen=True)
    class QParams:
        power_2_scale: bool = False
        amax_epsilon: float = 0.0
        random_hadamard_transform: bool = False
        stochastic_rounding: bool = False
        fp4_2d_quantization: bool = False

    @dataclasses.dataclass
    class DelayedScaling:
        margin: int = 0
        fp8_format: Format = Format.HYBRID
        amax_history_len: int = 1024
        amax_compute_algo: str = "max"
        scaling_factor_compute_algo: Optional[object] = None
        reduce_amax: bool = True
        fp8_dpa: bool = False
        fp8_mha: bool = False
        backward_override: Optional[str] = None

    @dataclasses.dataclass
    class Float8CurrentScaling:
        use_power_2_scales: bool = False
        fp8_format: Format = Format.HYBRID

    @dataclasses.dataclass
    class NVFP4BlockScaling:
        disable_rht: bool = False
        disable_stochastic_rounding: bool = False
        disable_2d_quantization: bool = False
        fp4_format: Format = Format.E2M1
        fp8_format: Format = Format.E4M3

    module = types.ModuleType(TE_MODULE)
    for cls in (_FormatHelper, Format, QParams, DelayedScaling, Float8CurrentScaling, NVFP4BlockScaling):
        cls.__module__, cls.__qualname__ = TE_MODULE, cls.__name__
        setattr(module, cls.__name__, cls)
    return module


@pytest.fixture
def te_recipe(monkeypatch):
    """TE's recipe module importable as transformer_engine.common.recipe for this test only."""
    module = te_recipe_module()
    for name in ("transformer_engine", "transformer_engine.common"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, TE_MODULE, module)
    return module


def te_delayed_state(te_recipe, history, scale_fwd, history_fwd, scale_bwd, history_bwd, num_gemms=1):
    """A module's _extra_state as TE writes it under delayed scaling (module/base.py get_extra_state)."""
    state = {"recipe": te_recipe.DelayedScaling(margin=1, amax_history_len=history),
             "scale_fwd": scale_fwd, "amax_history_fwd": history_fwd, "scale_bwd": scale_bwd, "amax_history_bwd": history_bwd,
             "extra_fp8_variables": {"fp8_checkpoint": True, "num_gemms": num_gemms, "fp8_max_fwd": 448, "fp8_max_bwd": 57344}}
    return torch.frombuffer(bytearray(pickle.dumps(state)), dtype=torch.uint8)


def slots(history, gemms):
    """Distinct values in every slot: scale_fwd [3N], history_fwd [L, 3N], scale_bwd [2N], history_bwd [L, 2N]."""
    scale_fwd = torch.arange(1, 3 * gemms + 1, dtype=torch.float32) * 0.5
    history_fwd = torch.arange(history * 3 * gemms, dtype=torch.float32).reshape(history, 3 * gemms) / 8
    scale_bwd = torch.arange(1, 2 * gemms + 1, dtype=torch.float32) * 0.25 + 4
    history_bwd = torch.arange(history * 2 * gemms, dtype=torch.float32).reshape(history, 2 * gemms) / 16 + 100
    return scale_fwd, history_fwd, scale_bwd, history_bwd


def test_te_delayed_state_reads_into_each_role(te_recipe):
    scale_fwd, history_fwd, scale_bwd, history_bwd = slots(4, 2)
    blob = te_delayed_state(te_recipe, 4, scale_fwd, history_fwd, scale_bwd, history_bwd, num_gemms=2)
    loaded = _te_extra_state.read_state(blob, 2, "LayerNormMLP")
    assert isinstance(loaded["recipe"], R.DelayedScaling)
    assert (loaded["recipe"].margin, loaded["recipe"].amax_history_len, loaded["recipe"].fp8_format) == (1, 4, R.Format.HYBRID)
    for g in range(2):
        gemm = loaded["gemms"][g]
        for role, scale, history, column in (("input", scale_fwd, history_fwd, 3 * g), ("weight", scale_fwd, history_fwd, 3 * g + 1),
                                             ("grad_output", scale_bwd, history_bwd, 2 * g)):
            assert gemm[f"{role}.scale"].tolist() == [scale[column].item()]
            assert gemm[f"{role}.amax_history"].tolist() == history[:, column].tolist()


def test_empty_and_stateless_te_states_hold_nothing(te_recipe):
    assert _te_extra_state.read_state(torch.empty(0, dtype=torch.uint8), 1, "Linear") is None
    assert _te_extra_state.read_state(None, 1, "Linear") is None
    # TE 2.x before the stateless rule pickled {"recipe", "extra_fp8_variables"} for current scaling.
    state = {"recipe": te_recipe.Float8CurrentScaling(), "extra_fp8_variables": {"fp8_checkpoint": True, "num_gemms": 1}}
    loaded = _te_extra_state.read_state(torch.frombuffer(bytearray(pickle.dumps(state)), dtype=torch.uint8), 1, "Linear")
    assert isinstance(loaded["recipe"], R.Float8CurrentScaling) and loaded["gemms"] == [None]


def test_te_1x_states_without_a_recipe_and_as_bytesio():
    scale_fwd, history_fwd, scale_bwd, history_bwd = slots(3, 1)
    state = {"scale_fwd": scale_fwd, "scale_inv_fwd": 1 / scale_fwd, "amax_history_fwd": history_fwd,
             "scale_bwd": scale_bwd, "scale_inv_bwd": 1 / scale_bwd, "amax_history_bwd": history_bwd,
             "extra_fp8_variables": {"num_gemms": 1}}
    blob = torch.frombuffer(bytearray(pickle.dumps(state)), dtype=torch.uint8)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    for form in (blob, buffer):
        loaded = _te_extra_state.read_state(form, 1, "Linear")
        assert isinstance(loaded["recipe"], R.DelayedScaling)  # TE 1.x had delayed scaling only
        assert loaded["gemms"][0]["weight.amax_history"].tolist() == history_fwd[:, 1].tolist()
        assert loaded["gemms"][0]["grad_output.scale"].tolist() == [scale_bwd[0].item()]


class _Exploit:
    def __reduce__(self):
        return (print, ("this must not run",))


def test_a_pickle_that_would_run_code_is_refused(capsys):
    blob = torch.frombuffer(bytearray(pickle.dumps({"recipe": None, "x": _Exploit()})), dtype=torch.uint8)
    with pytest.raises(pickle.UnpicklingError, match="builtins.print"):
        _te_extra_state.read_state(blob, 1, "Linear")
    assert "must not run" not in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="^Unsupported checkpoint format.$"):
        _te_extra_state.read_state([1, 2], 1, "Linear")
    with pytest.raises(ValueError, match="do not fit a module of 1 GEMM"):
        scale_fwd, history_fwd, scale_bwd, history_bwd = slots(2, 2)
        _te_extra_state.read_state(torch.frombuffer(bytearray(pickle.dumps(
            {"scale_fwd": scale_fwd, "amax_history_fwd": history_fwd, "scale_bwd": scale_bwd, "amax_history_bwd": history_bwd})),
            dtype=torch.uint8), 1, "Linear")


def te_set_extra_state(blob, te_recipe):
    """TE's set_extra_state, step by step, for delayed scaling: unpickle, take extra_fp8_variables,
    allocate the recipe state from the recipe (scale [3N] / [2N] ones, history [L, 3N] / [L, 2N]
    zeros) and copy_ the saved tensors into it."""
    state = pickle.loads(blob.numpy().tobytes())
    meta = dict(state["extra_fp8_variables"])
    recipe = state["recipe"]
    assert isinstance(recipe, te_recipe.DelayedScaling)
    n = meta["num_gemms"]
    out = {"scale_fwd": torch.ones(3 * n), "amax_history_fwd": torch.zeros(recipe.amax_history_len, 3 * n),
           "scale_bwd": torch.ones(2 * n), "amax_history_bwd": torch.zeros(recipe.amax_history_len, 2 * n)}
    for key, dst in out.items():
        dst.copy_(state[key])
    return recipe, meta, out


def test_our_delayed_state_loads_as_te_reads_it(te_recipe):
    rng = np.random.default_rng(1)
    gemm = {}
    for role in ("input", "weight", "grad_output"):
        gemm[f"{role}.scale"] = np.array([rng.uniform(1, 100)], np.float32)
        gemm[f"{role}.amax_history"] = rng.uniform(0, 3, 5).astype(np.float32)
    blob = _te_extra_state.write_state(R.DelayedScaling(margin=2, amax_history_len=5, fp8_format=R.Format.E4M3), [gemm], 9, True)
    assert blob.dtype == torch.uint8 and blob.dim() == 1
    recipe, meta, tensors = te_set_extra_state(blob, te_recipe)
    assert (recipe.margin, recipe.amax_history_len, recipe.fp8_format) == (2, 5, te_recipe.Format.E4M3)
    assert meta == {"fp8_checkpoint": True, "num_gemms": 1, "fp8_max_fwd": 448, "fp8_max_bwd": 448}
    assert tensors["scale_fwd"].tolist() == [gemm["input.scale"][0], gemm["weight.scale"][0], 1.0]
    assert tensors["amax_history_fwd"][:, 0].tolist() == gemm["input.amax_history"].tolist()
    assert tensors["amax_history_fwd"][:, 1].tolist() == gemm["weight.amax_history"].tolist()
    assert tensors["amax_history_fwd"][:, 2].tolist() == [0.0] * 5  # the output slot, never quantized here
    assert tensors["scale_bwd"].tolist() == [gemm["grad_output.scale"][0], 1.0]
    assert tensors["amax_history_bwd"][:, 0].tolist() == gemm["grad_output.amax_history"].tolist()
    assert pickle.loads(blob.numpy().tobytes())["nvfp4_torch"] == {"steps": 9}  # ours, a key TE does not read


def test_we_write_empty_where_te_does(te_recipe):
    assert _te_extra_state.write_state(None, [None], 3, False).numel() == 0
    assert _te_extra_state.write_state(R.DelayedScaling(), [None], 3, False).numel() == 0  # last forward not quantized
    for stateless in (R.Float8CurrentScaling(), R.Float8BlockScaling(), R.MXFP8BlockScaling()):
        assert _te_extra_state.write_state(stateless, [None], 3, True).numel() == 0
    # NVFP4 writes its recipe and the stochastic-rounding counter in TE's pickle form (TE 2.x writes
    # empty; it loads this and ignores it, the recipe being stateless).
    nv = R.NVFP4BlockScaling(disable_rht=True)
    blob = _te_extra_state.write_state(nv, [None], 4, True)
    state = pickle.loads(blob.numpy().tobytes())
    assert isinstance(state["recipe"], te_recipe.NVFP4BlockScaling) and state["recipe"].disable_rht is True
    assert isinstance(state["recipe"].fp4_quant_fwd_inp, te_recipe.QParams)
    assert state["recipe"].fp4_quant_fwd_inp.random_hadamard_transform is False
    assert state["extra_fp8_variables"]["num_gemms"] == 1 and "scale_fwd" not in state
    back = _te_extra_state.read_state(blob, 1, "Linear")
    assert back["steps"] == 4 and back["recipe"].fp4_quant_fwd_inp.random_hadamard_transform is False


def test_the_recipe_we_write_has_the_history_length_of_the_tensors(te_recipe):
    # TE allocates [recipe.amax_history_len, 3N] and copy_()s the saved history into it.
    gemm = {f"{role}.{key}": np.ones(3 if key == "amax_history" else 1, np.float32)
            for role in ("input", "weight", "grad_output") for key in ("scale", "amax_history")}
    recipe, _, tensors = te_set_extra_state(_te_extra_state.write_state(R.DelayedScaling(amax_history_len=16), [gemm], 0, True),
                                            te_recipe)
    assert recipe.amax_history_len == 3 and tensors["amax_history_fwd"].shape == (3, 3)


# ---- through the modules' state_dict ------------------------------------------------------------

def delayed_step(layer, x, recipe):
    with te.autocast(recipe=recipe):
        y = layer(x)
    y.float().sum().backward()
    return y


def test_a_te_state_dict_loads_and_its_scales_are_used(te_recipe):
    torch.manual_seed(0)
    layer = te.Linear(64, 32)
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(16, 64)
    scale_fwd = torch.tensor([8.0, 16.0, 1.0])
    history_fwd = torch.zeros(4, 3)
    history_fwd[1:, 0], history_fwd[1:, 1] = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.5, 0.25, 0.125])
    scale_bwd, history_bwd = torch.tensor([2.0, 1.0]), torch.zeros(4, 2)
    state = {k: v for k, v in layer.state_dict().items() if k != "_extra_state"}
    state["_extra_state"] = te_delayed_state(te_recipe, 4, scale_fwd, history_fwd, scale_bwd, history_bwd)
    layer.load_state_dict(state)
    recipe = R.DelayedScaling(amax_history_len=4)
    with te.autocast(recipe=recipe):
        y = layer(x)
    # The forward GEMM composed from the library's public calls with the loaded scales: X and W
    # quantized with scales 8 and 16, fprop with fast accumulation, TE's bf16 bias of an FP8 GEMM
    # with fp32 activations (docs/recipes.md).
    xq = nvfp4.quantize_fp8_with_scale(x.numpy(), "e4m3", scale=8.0)
    wq = nvfp4.quantize_fp8_with_scale(layer.weight.detach().numpy(), "e4m3", scale=16.0)
    b = layer.bias.detach().to(torch.bfloat16).float().numpy()
    expected = nvfp4.fp8_gemm(xq, wq, promotion_interval=0, bias=b)
    assert y.detach().numpy().tobytes() == expected.tobytes()


def test_our_state_dict_round_trips_and_resumes_bit_for_bit():
    torch.manual_seed(1)
    recipe = R.DelayedScaling(amax_history_len=8)
    xs = [torch.randn(16, 64) for _ in range(4)]
    uninterrupted = te.LayerNormLinear(64, 32)
    resumed = te.LayerNormLinear(64, 32)
    resumed.load_state_dict(uninterrupted.state_dict())
    for x in xs[:2]:
        delayed_step(uninterrupted, x, recipe)
        delayed_step(resumed, x, recipe)
    saved = resumed.state_dict()
    assert saved["_extra_state"].dtype == torch.uint8 and saved["_extra_state"].numel() > 0
    fresh = te.LayerNormLinear(64, 32)
    fresh.load_state_dict(saved)
    for x in xs[2:]:
        a, b = delayed_step(uninterrupted, x, recipe), delayed_step(fresh, x, recipe)
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()


def test_the_extra_state_is_empty_where_te_writes_it_empty():
    torch.manual_seed(2)
    layer = te.Linear(64, 32)
    assert layer.state_dict()["_extra_state"].numel() == 0  # no quantized forward yet
    x = torch.randn(16, 64)
    delayed_step(layer, x, R.DelayedScaling())
    assert layer.state_dict()["_extra_state"].numel() > 0
    layer(x)  # TE's fp8_checkpoint is the last forward's: a forward without quantization empties it
    assert layer.state_dict()["_extra_state"].numel() == 0
    delayed_step(layer, x, R.Float8CurrentScaling())
    assert layer.state_dict()["_extra_state"].numel() == 0  # stateless recipe (TE 2.x)
    fresh = te.Linear(64, 32)
    fresh.load_state_dict(layer.state_dict())  # an empty state loads and leaves the layer as it was
    assert fresh.state_dict()["_extra_state"].numel() == 0


# ---- modules of several GEMMs (TE's LayerNormMLP: fc1 = GEMM 0, fc2 = GEMM 1; TE's GroupedLinear:
# expert i = GEMM i; csrc/common.h FP8FwdTensors / FP8BwdTensors, layernorm_mlp.py _get_quantizers) --

def one_gemm_slice(te_recipe, history, tensors, g):
    """GEMM g's columns of a multi-GEMM TE state, as the one-GEMM state TE's te.Linear would write."""
    scale_fwd, history_fwd, scale_bwd, history_bwd = tensors
    return te_delayed_state(te_recipe, history, scale_fwd[3 * g:3 * g + 3].clone(), history_fwd[:, 3 * g:3 * g + 3].clone(),
                            scale_bwd[2 * g:2 * g + 2].clone(), history_bwd[:, 2 * g:2 * g + 2].clone())


def mlp_state(te_recipe, history):
    """A LayerNormMLP delayed-scaling state as TE writes it: distinct powers of two in every slot."""
    scale_fwd = torch.tensor([4.0, 64.0, 1.0, 2.0, 32.0, 1.0])
    history_fwd = torch.zeros(history, 6)
    history_fwd[1:, 0], history_fwd[1:, 1] = torch.tensor([3.0, 5.0, 7.0]), torch.tensor([0.5, 0.25, 0.125])
    history_fwd[1:, 3], history_fwd[1:, 4] = torch.tensor([11.0, 13.0, 17.0]), torch.tensor([0.75, 0.375, 0.1875])
    scale_bwd, history_bwd = torch.tensor([8192.0, 1.0, 16384.0, 1.0]), torch.zeros(history, 4)
    history_bwd[1:, 0], history_bwd[1:, 2] = torch.tensor([1e-3, 2e-3, 3e-3]), torch.tensor([4e-3, 5e-3, 6e-3])
    return scale_fwd, history_fwd, scale_bwd, history_bwd


def test_a_te_layernorm_mlp_state_dict_loads_and_drives_each_gemm(te_recipe):
    # TE's two-GEMM layout read into fc1 and fc2: the MLP then computes, forward and backward, what
    # TE's one-GEMM modules loaded with each GEMM's columns compute (the one-GEMM layout is checked
    # against the library's public FP8 calls above), and not what the fresh MLP computes.
    torch.manual_seed(3)
    history = 4
    tensors = mlp_state(te_recipe, history)
    mlp = te.LayerNormMLP(64, 128, activation="swiglu", normalization="RMSNorm")
    state = {k: v for k, v in mlp.state_dict().items() if k != "_extra_state"}
    assert list(mlp.state_dict()) == ["layer_norm_weight", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "_extra_state"]
    state["_extra_state"] = te_delayed_state(te_recipe, history, *tensors, num_gemms=2)
    fresh = te.LayerNormMLP(64, 128, activation="swiglu", normalization="RMSNorm")
    fresh.load_state_dict({k: v for k, v in state.items() if k != "_extra_state"}, strict=False)
    mlp.load_state_dict(state)
    fc1 = te.LayerNormLinear(64, 256, normalization="RMSNorm")
    fc2 = te.Linear(128, 64)
    fc1.load_state_dict({"layer_norm_weight": state["layer_norm_weight"], "weight": state["fc1_weight"],
                         "bias": state["fc1_bias"], "_extra_state": one_gemm_slice(te_recipe, history, tensors, 0)})
    fc2.load_state_dict({"weight": state["fc2_weight"], "bias": state["fc2_bias"],
                         "_extra_state": one_gemm_slice(te_recipe, history, tensors, 1)})
    recipe = R.DelayedScaling(amax_history_len=history)
    x = torch.randn(32, 64)
    dy = torch.randn(32, 64) * 1e-3

    def step(forward, params):
        xi = x.clone().requires_grad_()
        with te.autocast(recipe=recipe):
            y = forward(xi)
        y.backward(dy)
        return [y, xi.grad] + [p.grad for p in params]

    def composed(xi):
        a, g = fc1(xi).chunk(2, dim=-1)
        return fc2(torch.nn.functional.silu(a) * g)

    got = step(mlp, [mlp.fc1_weight, mlp.fc2_weight])
    expected = step(composed, [fc1.weight, fc2.weight])
    for a, b in zip(got, expected):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()
    other = step(fresh, [fresh.fc1_weight, fresh.fc2_weight])
    assert not torch.equal(got[0], other[0]) and not torch.equal(got[1], other[1])  # the loaded scales were used
    assert not torch.equal(got[2], other[2]) and not torch.equal(got[3], other[3])


def test_our_multi_gemm_states_are_in_tes_layout(te_recipe):
    # What a LayerNormMLP / GroupedLinear writes after delayed-scaling steps, read as TE reads it:
    # GEMM g's input, weight and grad_output in forward slots 3g, 3g+1 and backward slot 2g.
    torch.manual_seed(4)
    recipe = R.DelayedScaling(amax_history_len=3)
    mlp = te.LayerNormMLP(64, 64)
    experts = te.GroupedLinear(3, 64, 32)
    x = torch.randn(48, 64)
    for _ in range(2):
        delayed_step(mlp, x, recipe)
        with te.autocast(recipe=recipe):
            y = experts(x, [16, 0, 32])
        y.sum().backward()
    for module, units in ((mlp, [mlp._fc1, mlp._fc2]), (experts, experts._units)):
        _, meta, tensors = te_set_extra_state(module.state_dict()["_extra_state"], te_recipe)
        assert meta["num_gemms"] == len(units)
        for g, unit in enumerate(units):
            scaling = unit.extra_state()["scaling"]
            for role, key, column in (("input", "fwd", 3 * g), ("weight", "fwd", 3 * g + 1), ("grad_output", "bwd", 2 * g)):
                assert tensors[f"scale_{key}"][column].item() == scaling[f"{role}.scale"].item()
                assert tensors[f"amax_history_{key}"][:, column].tolist() == scaling[f"{role}.amax_history"].tolist()
            assert tensors["scale_fwd"][3 * g + 2].item() == 1.0 and tensors["scale_bwd"][2 * g + 1].item() == 1.0
        assert torch.count_nonzero(tensors["amax_history_fwd"][:, 0::3]) > 0  # real histories, not the defaults
    # and they load back: a fresh module resumes with the same states
    again = te.GroupedLinear(3, 64, 32)
    again.load_state_dict(experts.state_dict())
    for a, b in zip(again._units, experts._units):
        sa, sb = a.extra_state()["scaling"], b.extra_state()["scaling"]
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_a_te_transformer_layer_state_dict_loads(te_recipe):
    # TE's TransformerLayer keys (fuse_qkv_params=False: query / key / value slices of
    # layernorm_qkv), each GEMM module's _extra_state in TE's layout, the attention core's
    # _extra_state TE's empty tensor.
    torch.manual_seed(5)
    layer = te.TransformerLayer(64, 128, 4, hidden_dropout=0.0, attention_dropout=0.0)
    state = layer.state_dict()
    assert [k for k in state if k.endswith("_extra_state")] == [
        "self_attention.layernorm_qkv._extra_state", "self_attention.core_attention._extra_state",
        "self_attention.proj._extra_state", "layernorm_mlp._extra_state"]
    assert [k for k in state if k.startswith("self_attention.layernorm_qkv.")][:5] == [
        "self_attention.layernorm_qkv.layer_norm_weight", "self_attention.layernorm_qkv.layer_norm_bias",
        "self_attention.layernorm_qkv.query_weight", "self_attention.layernorm_qkv.key_weight",
        "self_attention.layernorm_qkv.value_weight"]
    history = 4
    te_state = dict(state)
    te_state["self_attention.layernorm_qkv._extra_state"] = te_delayed_state(
        te_recipe, history, torch.tensor([2.0, 4.0, 1.0]), torch.ones(history, 3), torch.tensor([512.0, 1.0]),
        torch.ones(history, 2))
    te_state["self_attention.proj._extra_state"] = te_delayed_state(
        te_recipe, history, torch.tensor([8.0, 16.0, 1.0]), torch.ones(history, 3), torch.tensor([1024.0, 1.0]),
        torch.ones(history, 2))
    te_state["layernorm_mlp._extra_state"] = te_delayed_state(te_recipe, history, *mlp_state(te_recipe, history), num_gemms=2)
    te_state["self_attention.core_attention._extra_state"] = torch.empty(0, dtype=torch.uint8)
    loaded = te.TransformerLayer(64, 128, 4, hidden_dropout=0.0, attention_dropout=0.0)
    loaded.load_state_dict(te_state)
    def scale(unit, role):
        return unit.extra_state()["scaling"][f"{role}.scale"].item()

    mlp_units = (loaded.layernorm_mlp._fc1, loaded.layernorm_mlp._fc2)
    assert [scale(u, "weight") for u in mlp_units] == [64.0, 32.0]
    assert [scale(u, "grad_output") for u in mlp_units] == [8192.0, 16384.0]
    assert scale(loaded.self_attention.layernorm_qkv._unit, "weight") == 4.0
    assert scale(loaded.self_attention.proj._unit, "input") == 8.0
    x = torch.randn(16, 2, 64)
    with te.autocast(recipe=R.DelayedScaling(amax_history_len=history)):
        assert loaded(x).isfinite().all()
