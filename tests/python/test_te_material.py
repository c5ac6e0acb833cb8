# TransformerEngine's own material on nvfp4.torch, written here (not copied): TE's sanity matrix
# (tests/pytorch/test_sanity.py: every module x recipe x dtype x zero tokens, with TE's skips), its
# numerics (tests/pytorch/test_numerics.py: the modules in high precision against a float32
# reference, TE's dtype_tols), and the ports of TE's getting-started script and quickstart notebook
# (python/examples/te_getting_started.py, te_quickstart.py) run at small sizes.
import importlib.util
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as R  # noqa: E402

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "python" / "examples"


def nvfp4_vanilla():
    """TE's sanity NVFP4 recipe: no RHT, no stochastic rounding, 1D blocks."""
    return R.NVFP4BlockScaling(disable_rht=True, disable_stochastic_rounding=True, disable_2d_quantization=True)


RECIPES = {"none": lambda: None, "delayed": R.DelayedScaling, "current": R.Float8CurrentScaling,
           "block": R.Float8BlockScaling, "mxfp8": R.MXFP8BlockScaling, "nvfp4": nvfp4_vanilla}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# float16 here for the modules that take it so far (LayerNormMLP and the attention family follow)
HALF_MODULES = ("Linear", "LayerNormLinear", "LayerNormMLP", "LayerNorm", "RMSNorm")
HIDDEN, SEQ = 64, 32  # TE's "small" config: batch 2, sequence 32, 2 heads of 32


def make(module, dtype):
    if module == "Linear":
        return te.Linear(HIDDEN, HIDDEN, params_dtype=dtype)
    if module == "LayerNormLinear":
        return te.LayerNormLinear(HIDDEN, 3 * HIDDEN, params_dtype=dtype, zero_centered_gamma=True)
    if module == "LayerNormMLP":
        return te.LayerNormMLP(HIDDEN, 4 * HIDDEN, params_dtype=dtype, activation="swiglu", normalization="RMSNorm")
    return getattr(te, module)(HIDDEN, params_dtype=dtype)


MODULE_DTYPES = [(m, d) for m in ("Linear", "LayerNormLinear", "LayerNormMLP", "LayerNorm", "RMSNorm") for d in sorted(DTYPES)
                 if d != "fp16" or m in HALF_MODULES]


@pytest.fixture
def te_strict(monkeypatch):
    from nvfp4.torch.module import _te_checks
    monkeypatch.setattr(_te_checks, "TE_STRICT", True)


@pytest.mark.parametrize("batch", [0, 2])
@pytest.mark.parametrize("recipe", sorted(RECIPES))
@pytest.mark.parametrize("module,dtype", MODULE_DTYPES)
def test_sanity(module, recipe, dtype, batch, te_strict):
    fp8 = RECIPES[recipe]()
    torch.manual_seed(1234)
    block = make(module, DTYPES[dtype])
    x = torch.randn(SEQ, batch, HIDDEN, dtype=DTYPES[dtype], requires_grad=True)
    if fp8 is not None and fp8.nvfp4() and dtype == "fp16" and module not in ("LayerNorm", "RMSNorm"):
        # TE skips these: cuBLAS has no FP4 GEMM with float16 output, and TE says so.
        with pytest.raises(RuntimeError, match="^FP4 GEMM does not support FP16 output!$"), te.autocast(recipe=fp8):
            block(x)
        return
    with te.autocast(enabled=fp8 is not None, recipe=fp8):
        out = block(x)
    out.sum().backward()
    assert out.shape == (SEQ, batch, block_out(module)) and out.dtype == DTYPES[dtype]
    assert x.grad.shape == x.shape and x.grad.dtype == x.dtype
    assert torch.isfinite(out.float()).all() and torch.isfinite(x.grad.float()).all()
    for name, p in block.named_parameters():
        assert p.grad is not None and p.grad.dtype == p.dtype, name


def block_out(module):
    return {"LayerNormLinear": 3 * HIDDEN}.get(module, HIDDEN)


@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("quantized_params", [False, True])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_sanity_linear_with_zero_tokens(recipe, dtype, quantized_params, use_bias, te_strict):
    fp8 = RECIPES[recipe]()
    if fp8 is not None and fp8.nvfp4() and dtype == "fp16":
        fp8 = None  # TE skips it (FP16 output for NVFP4 not supported; test_sanity checks the refusal)
    with te.quantized_model_init(enabled=fp8 is not None and quantized_params, recipe=fp8):
        layer = te.Linear(HIDDEN, 4 * HIDDEN, bias=use_bias, params_dtype=DTYPES[dtype])
    x = torch.randn(0, HIDDEN, dtype=DTYPES[dtype], requires_grad=True)
    with te.autocast(enabled=fp8 is not None, recipe=fp8):
        out = layer(x)
    out.sum().backward()
    assert out.shape == (0, 4 * HIDDEN)


# ---- numerics: high precision against a float32 reference, TE's tolerances -------------------------

def dtype_tols(dtype):
    """TE's tests/pytorch/utils.py dtype_tols (torch.testing's defaults per dtype)."""
    return {torch.float32: dict(rtol=1.3e-6, atol=1e-5), torch.float16: dict(rtol=1e-3, atol=1e-5),
            torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5)}[dtype]


def reference(module, block, x):
    """The module's function in float32 from its parameters, by torch operations, its intermediate
    tensors rounded to the layer's dtype where TE's are (the norm's output, fc1's output, the
    activation's output: each a tensor of the activation dtype in TE)."""
    p = {k: v.detach().float() for k, v in block.named_parameters()}
    dtype, x = x.dtype, x.float()
    r = lambda t: t.to(dtype).float()  # noqa: E731
    if module == "Linear":
        return x @ p["weight"].T + p["bias"]
    if module == "LayerNormLinear":
        ln = torch.nn.functional.layer_norm(x, (HIDDEN,), p["layer_norm_weight"] + 1, p["layer_norm_bias"], 1e-5)
        return r(ln) @ p["weight"].T + p["bias"]
    if module == "LayerNormMLP":
        rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * p["layer_norm_weight"]
        a, g = r(r(rms) @ p["fc1_weight"].T + p["fc1_bias"]).chunk(2, dim=-1)
        return r(torch.nn.functional.silu(a) * g) @ p["fc2_weight"].T + p["fc2_bias"]
    if module == "LayerNorm":
        return torch.nn.functional.layer_norm(x, (HIDDEN,), p["weight"], p["bias"], 1e-5)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * p["weight"]


@pytest.mark.parametrize("module,dtype", MODULE_DTYPES)
def test_numerics_against_float32(module, dtype):
    torch.manual_seed(7)
    block = make(module, DTYPES[dtype])
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn_like(p.float()).mul_(0.1).to(p.dtype))
    x = torch.randn(SEQ, 2, HIDDEN).to(DTYPES[dtype])
    y = block(x)
    expected = reference(module, block, x)
    # TE's tolerance for the dtype (test_numerics.py compares in the layer's dtype; here the
    # reference is float32 with the layer's roundings, so the output's own rounding is on top).
    torch.testing.assert_close(y.float(), expected, **dtype_tols(DTYPES[dtype]))


# ---- TE's getting-started script and quickstart notebook ------------------------------------------

def load_example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_getting_started_table_on_cpu(tmp_path):
    example = load_example("te_getting_started")
    csv = tmp_path / "getting_started_pytorch_summary.csv"
    times = example.run(hidden_size=64, sequence_length=16, batch_size=2, ffn_hidden_size=128, num_attention_heads=2,
                        timing_iters=1, warmup_iters=0, csv_path=csv)
    assert list(times) == list(example.VARIANTS)
    lines = csv.read_text().splitlines()
    assert lines[0] == "Implementation,Time (ms),Speedup" and len(lines) == 7
    assert lines[1].startswith("Baseline PyTorch,") and lines[1].endswith(",1.00x")
    assert [line.split(",")[0] for line in lines[1:]] == list(example.VARIANTS)


def test_quickstart_matches_the_plain_layer():
    example = load_example("te_quickstart")
    results = example.run(hidden_size=64, sequence_length=16, batch_size=2, ffn_hidden_size=128, num_attention_heads=2,
                          dtype=torch.bfloat16, timing_iters=1, warmup_iters=0)
    reference_output = results["basic PyTorch"][0].float()
    for name, (y, _) in results.items():
        assert y.dtype == torch.bfloat16 and torch.isfinite(y.float()).all(), name
    # The TE modules built like the plain layer give its output to bf16 precision. (TransformerLayer
    # is TE's own layer: causal attention by default, its QKV parameters its own; the notebook
    # does not compare it with the plain layer, and neither does this.)
    for name in ("te.Linear + te.LayerNorm", "te.LayerNormLinear + te.LayerNormMLP"):
        assert (results[name][0].float() - reference_output).abs().max() < 0.05, name
    # FP8 changes TransformerLayer's output by its E4M3 quantization only.
    fp8, high = results["te.TransformerLayer + FP8"][0].float(), results["te.TransformerLayer"][0].float()
    assert (fp8 - high).abs().max() < 0.25 and not torch.equal(fp8, high)
