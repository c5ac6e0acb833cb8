#!/usr/bin/env python3
"""Golden vectors for the training-recipe quantizers, produced by TransformerEngine's own
pure-PyTorch reference quantizers (they run on the CPU; the device machine has torch).

TE is not installed there, so its reference files are loaded from TE_DIR as they are:
  TE_DIR/references/{quantize_scale_calc,ref_per_tensor_cs,blockwise_quantizer_reference}.py
      (TE tests/pytorch/references/), imported as the package `references`, as TE's tests do;
  TE_DIR/custom_recipes/{reference_utils,reference_current_scaling,reference_nvfp4}.py
      (TE transformer_engine/pytorch/custom_recipes/), imported under their TE module names;
  TE_DIR/tests/test_mxfp8_2d_quantize.py (TE tests/pytorch/): only its E8M0 helpers
      (_float_to_e8m0, _e8m0_to_scale_inv) and their constants, taken out with Python's ast module
      (the rest of that file needs TE's CUDA extension).
  TE_DIR/quantization.py (TE transformer_engine/pytorch/quantization.py): only its Python amax and
      scale update for delayed scaling (_amax_and_scale_update and the functions it calls), taken
      out the same way, their TorchScript / fuser decorators dropped (eager torch, same fp32 ops).
The few TE modules those files import and that need TE's extension (constants, DType, the Quantizer
base class, the GEMM helpers) are replaced by small stand-ins below; none of them takes part in
the arithmetic.

Kinds written (see the README section this script writes for the fields):
  fp8_scale          scale_from_amax_tensor on a list of amax values
  fp8_current        ref_per_tensor_cs_cast (per-tensor current scaling)
  fp8_block 1x128 / 128x128   BlockwiseQuantizerReference (Float8BlockScaling)
  mxfp8_te           1x32 blocks, E8M0 by TE's _float_to_e8m0, elements x / 2^(e-127) cast to FP8
  nvfp4_4over6 1x16 / 16x16   NVFP4QuantizerRef(nvfp4_use_4over6=True)
  nvfp4_row_scaled plain / 4over6   NVFP4QuantizerRef(row_scaled_nvfp4=True)
  fp8_delayed        _amax_and_scale_update stepped over amax sequences (delayed scaling, the
                     unfused update TE runs with NVTE_UNFUSED_FP8_UPDATE=1 or a callable algorithm)

usage: run_te_recipe_refs.py TE_DIR OUT_DIR [--dry]
  --dry: no torch; writes zero-filled outputs of the right shapes (checks layout and size here).
"""
import ast
import enum
import importlib.util
import json
import os
import sys
import types

import numpy as np

PREFIX = "te_"
F32_MAX = float(np.finfo(np.float32).max)


# ---------------------------------------------------------------- inputs (numpy only, seeded)

def to_bf16_exact(a):
    """Rounds float32 values to bf16 (nearest even) and widens them back: exact bf16 values."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def make_inputs():
    """name -> (float32 array, dtype name, description). bf16 inputs hold bf16-exact values."""
    rng = np.random.default_rng(20261123)
    out = {}

    x = rng.standard_normal((32, 192)).astype(np.float32) * 2.0
    out["normal"] = (to_bf16_exact(x), "bf16", "normal(0, 2)")

    # Blocks of 32 at very different magnitudes, plus planted edge blocks.
    x = rng.standard_normal((32, 192)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-6, 6, size=(32, 6, 1))).repeat(32, axis=2).reshape(32, 192).astype(np.float32)
    x[0, 0:32] = 0.0                                   # a zero block
    x[1, 32:64] = rng.uniform(-1, 1, 32) * 1e-38       # tiny block (E8M0 near its bottom)
    x[2, 0:32] = rng.uniform(-1, 1, 32) * 448.0 * 0.125
    x[2, 5] = 448.0 * 0.125                            # amax exactly 448 * 2^-3
    x[3, 0:32] = rng.uniform(-1, 1, 32) * 57344.0
    x[3, 7] = -57344.0                                 # amax exactly the E5M2 max
    x[4, :] = 0.0                                      # a zero row (row-scaled: amax 0)
    x[6, 64:96] = 0.5 * np.array([(k % 7) for k in range(32)], dtype=np.float32)  # grid points / ties
    x[7, 0:16] = -0.0                                  # negative zeros
    out["mixed"] = (to_bf16_exact(x), "bf16", "log-uniform block magnitudes, planted edge blocks")

    x = (rng.standard_normal((48, 96)) * 3.0).astype(np.float32)
    x[0, 0] = -0.0
    out["fp32"] = (x, "fp32", "normal(0, 3) fp32")

    x = (rng.uniform(-1, 1, (16, 64)) * 1e-37).astype(np.float32)   # 448 / amax overflows fp32
    x[0, 0] = 9e-38
    out["tiny"] = (to_bf16_exact(x), "bf16", "|x| < 1e-37 (fp8_max / amax = inf)")

    out["zero"] = (np.zeros((16, 128), np.float32), "bf16", "all zero")

    # Values on and between the E4M3 grid at the top of its range (amax 448: scale 1).
    grid = np.array([448, 440, 432, 424, 416, 447.99, 436, 444, 240, 232, 248, 0.5, 0.0625,
                     0.001953125, 0.0009765625, 0.00146484375], dtype=np.float32)
    x = np.resize(grid, (32, 128)).astype(np.float32)
    x *= np.where(rng.random((32, 128)) < 0.5, -1.0, 1.0).astype(np.float32)
    x[0, 0] = 448.0
    out["near_max"] = (x, "fp32", "E4M3 grid points and midpoints near 448, amax 448")

    x = (rng.standard_normal((16, 128)) * 1e3).astype(np.float32)
    x[0, 3] = 3.0e38
    x[5, 100] = -F32_MAX
    x[9, 0:128] *= 1e30
    out["huge"] = (x, "fp32", "normal(0, 1e3) with values up to FLT_MAX")

    x = rng.standard_normal((130, 144)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-3, 3, size=(130, 2))).repeat(72, axis=1).astype(np.float32)
    x[0:128, 128:144] = 0.0                           # a zero 128x128 block (partial)
    x[129, 0:128] = 0.0                               # a zero 1x128 block
    out["edge"] = (to_bf16_exact(x), "bf16", "partial 128 blocks, zero blocks")
    return out


AMAX_VALUES = [0.0, 1.4e-45, 1e-40, 1e-38, 1.1754944e-38, 1e-37, 1.3e-36, 1.4e-36, 1e-34, 1e-30,
               1e-6, 1e-3, 0.1, 1.0, 1.5, 2.0, 3.0, 7.0, 448.0, 447.99, 448.01, 57344.0, 1e4,
               1e20, 3e38, F32_MAX, float("inf"), float("nan")]


def amax_list():
    rng = np.random.default_rng(7)
    extra = (10.0 ** rng.uniform(-40, 38, 24)).astype(np.float32)
    return np.concatenate([np.array(AMAX_VALUES, np.float32), extra])


def delayed_sequences():
    """name -> float32 per-step amaxes for the delayed-scaling update (40 steps each)."""
    rng = np.random.default_rng(11)
    out = {"random": (10.0 ** rng.uniform(-3, 3, 40)).astype(np.float32)}
    x = (10.0 ** rng.uniform(-2, 2, 40)).astype(np.float32)
    x[[3, 4, 9, 20, 21, 22, 23, 24, 31]] = 0.0          # steps that saw no nonzero value
    x[0] = 0.0                                           # from the start
    out["zeros"] = x
    x = (10.0 ** rng.uniform(-2, 2, 40)).astype(np.float32)
    x[5], x[12], x[13], x[27] = np.inf, np.nan, 0.0, np.nan
    out["non_finite"] = x
    x = np.array([1e-38, 1e-40, 1.4e-45, 2.0e-36, 1.1754944e-38, 1.0, 3e38, F32_MAX, 1e-45, 448.0] * 4, np.float32)
    out["edges"] = x
    out["decay"] = (1000.0 * 0.7 ** np.arange(40)).astype(np.float32)
    return out


# ---------------------------------------------------------------- loading TE's reference files

class _Anything:
    """Stand-in for TE objects used only in signatures (gemm.MMParams, gemm.GEMMType.FPROP)."""

    def __getattr__(self, name):
        return _Anything()

    def __call__(self, *a, **k):
        return _Anything()

    def __or__(self, other):
        return self

    __ror__ = __or__


class _AnythingModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


def _module(name, package=False, cls=types.ModuleType):
    m = cls(name)
    if package:
        m.__path__ = []
    sys.modules[name] = m
    parent, _, leaf = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], leaf, m)
    return m


def _load_file(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    parent, _, leaf = name.rpartition(".")
    if parent and parent in sys.modules:
        setattr(sys.modules[parent], leaf, m)
    spec.loader.exec_module(m)
    return m


def _extract(path, names, namespace, drop_decorators=False):
    """Compiles the named top-level assignments / functions of a file into namespace (without
    their decorators when drop_decorators is set)."""
    tree = ast.parse(open(path).read(), filename=path)
    body = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            if drop_decorators:
                node.decorator_list = []
            body.append(node)
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) in names for t in node.targets):
            body.append(node)
    found = {getattr(n, "name", None) or n.targets[0].id for n in body}
    missing = set(names) - found
    if missing:
        raise RuntimeError(f"{path}: not found: {sorted(missing)}")
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), namespace)
    return namespace


def load_te(te_dir, torch):
    class DType(enum.Enum):
        kFloat8E4M3 = 7
        kFloat8E5M2 = 8

    _module("transformer_engine", package=True)
    tp = _module("transformer_engine.pytorch", package=True)
    tp.DType = DType
    const = _module("transformer_engine.pytorch.constants")
    const.TE_DType_To_Torch = {DType.kFloat8E4M3: torch.float8_e4m3fn, DType.kFloat8E5M2: torch.float8_e5m2}
    qt = _module("transformer_engine.pytorch.quantized_tensor")

    class Quantizer:  # the attributes TE's base class sets and the references read
        def __init__(self, *, rowwise, columnwise):
            self.rowwise_usage = rowwise
            self.columnwise_usage = columnwise
            self.internal = False

    class QuantizedTensorStorage:
        pass

    qt.Quantizer, qt.QuantizedTensorStorage = Quantizer, QuantizedTensorStorage
    _module("transformer_engine.pytorch.custom_recipes", package=True)
    _module("transformer_engine.pytorch.custom_recipes.gemm", cls=_AnythingModule)
    cr = os.path.join(te_dir, "custom_recipes")
    _load_file("transformer_engine.pytorch.custom_recipes.reference_utils", os.path.join(cr, "reference_utils.py"))
    cs = _load_file("transformer_engine.pytorch.custom_recipes.reference_current_scaling",
                    os.path.join(cr, "reference_current_scaling.py"))
    nv = _load_file("transformer_engine.pytorch.custom_recipes.reference_nvfp4", os.path.join(cr, "reference_nvfp4.py"))

    sys.path.insert(0, te_dir)
    import references.quantize_scale_calc as qsc  # noqa: E402
    import references.ref_per_tensor_cs as pcs  # noqa: E402
    import references.blockwise_quantizer_reference as bqr  # noqa: E402

    mx_path = os.path.join(te_dir, "tests", "test_mxfp8_2d_quantize.py")
    mx = {}
    for fp8_max in (448.0, 57344.0):
        ns = {"torch": torch}
        _extract(mx_path, ["FP8_E4M3_MAX", "_float_to_e8m0", "_e8m0_to_scale_inv"], ns)
        # The TE function divides by the module constant FP8_E4M3_MAX; for E5M2 blocks the same
        # rule with E5M2's max (TE's kernel uses Quantized_Limits<OType>::max_norm_rcp).
        ns["FP8_E4M3_MAX"] = fp8_max
        mx[fp8_max] = ns

    # Delayed scaling's Python update. Its signatures name typing's Tuple / Union / Callable and
    # the recipe class (only its attributes amax_compute_algo, scaling_factor_compute_algo and
    # margin are read).
    import typing
    delayed = {"torch": torch, "Tuple": typing.Tuple, "Union": typing.Union, "Callable": typing.Callable,
               "DelayedScaling": object}
    _extract(os.path.join(te_dir, "quantization.py"),
             ["_update_amax_history", "_default_get_amax_and_update_history", "_default_sf_compute",
              "_compute_amax_and_update_history", "_compute_scaling_factor", "_amax_and_scale_update"],
             delayed, drop_decorators=True)
    return {"qsc": qsc, "pcs": pcs, "bqr": bqr, "cs": cs, "nv": nv, "mx": mx, "DType": DType, "delayed": delayed}


README = """## Training-recipe quantizers (kinds `fp8_scale`, `fp8_current`, `fp8_block`, `mxfp8_te`, `nvfp4_4over6`, `nvfp4_row_scaled`, `fp8_delayed`)

Producer: `producers/run_te_recipe_refs.py`, which runs TransformerEngine's own pure-PyTorch
reference quantizers (TE d0067d0, the files as they are; torch 2.11.0 on the CPU of the device
machine) on seeded inputs. TE's files are loaded from a directory given on the command line, not
kept here.

| kind / mode | TE reference | what it pins down |
|---|---|---|
| `fp8_scale` | `tests/pytorch/references/quantize_scale_calc.py` `scale_from_amax_tensor` | scale and scale_inv for 52 amax values (0, subnormals, the values where fp8_max / amax overflows, FLT_MAX, Inf, NaN, random) x E4M3 / E5M2 x power-of-2 on / off x epsilon 0 / 1e-3 x fp32 / bf16 input type |
| `fp8_current` | `tests/pytorch/references/ref_per_tensor_cs.py` `ref_per_tensor_cs_cast` (also runs `custom_recipes/reference_current_scaling.py` `CurrentScalingQuantizerRef` and records where it differs) | per-tensor current scaling: FP8 codes and scale_inv |
| `fp8_block 1x128`, `fp8_block 128x128` | `tests/pytorch/references/blockwise_quantizer_reference.py` `BlockwiseQuantizerReference` (unmunged scales) | Float8BlockScaling: codes, fp32 scale_inv per block, the 1x128 columnwise copy (from xᵀ) |
| `mxfp8_te` | `tests/pytorch/test_mxfp8_2d_quantize.py` `_float_to_e8m0`, `_e8m0_to_scale_inv` applied to 1x32 blocks (elements `x / 2^(e-127)` cast to FP8; for E5M2 the same functions with its max 57344) | MXFP8 with TE's round-up E8M0: codes, E8M0 bytes, rowwise and columnwise (from xᵀ) |
| `nvfp4_4over6 1x16`, `nvfp4_4over6 16x16` | `custom_recipes/reference_nvfp4.py` `NVFP4QuantizerRef(nvfp4_use_4over6=True)` | 4over6 (MAE / MSE, E4M3 bound 256 / 448): packed codes, E4M3 scales, both copies, amax |
| `nvfp4_row_scaled plain`, `nvfp4_row_scaled 4over6` | `NVFP4QuantizerRef(row_scaled_nvfp4=True)` (and with 4over6 MAE 256) | one amax per row (per column for the columnwise copy): codes, scales, amaxes |
| `fp8_delayed` | `transformer_engine/pytorch/quantization.py` `_amax_and_scale_update` (the Python update TE runs with `NVTE_UNFUSED_FP8_UPDATE=1` or a callable `amax_compute_algo` / `scaling_factor_compute_algo`), decorators dropped | delayed scaling over 40 steps: 5 amax sequences (`random`, `zeros` with steps of amax 0, `non_finite` with Inf / NaN steps, `edges` with amaxes where fp8_max / amax overflows or is near FLT_MAX, `decay`) x E4M3 (448) / E5M2 (57344) x history length 1 / 4 / 16 x `max` / `most_recent` x margin 0 / 2 / -1: the scale and the whole history after every step |

Inputs (`input`, float32 [M, N]; `dtype` says whether the peer got them as bf16, then they are
bf16-exact): `normal` 32x192, `mixed` 32x192 (blocks of 32 at magnitudes 1e-6..1e6, a zero block,
a tiny block, amax exactly 448 * 2^-3 and 57344, a zero row, -0.0), `fp32` 48x96, `tiny` 16x64
(|x| < 1e-37, so fp8_max / amax overflows), `zero` 16x128, `near_max` 32x128 (E4M3 grid points and
midpoints near 448), `huge` 16x128 (up to FLT_MAX), `edge` 130x144 (partial and zero 128-blocks).
Fields: `format` (e4m3 | e5m2), `pow2`, `eps`; `data` uint8 codes [M, N] (FP8) or packed [M, N/2]
(NVFP4, first element in the low nibble); `scale_inv` float32 ([1] per tensor, [M, ceil(N/128)]
for 1x128, [ceil(M/128), ceil(N/128)] for 128x128); `scale` uint8 (E8M0 [M, N/32] or E4M3
[M, N/16], a 16x16 tile's scale on each of its rows); `data_t`, `scale_t` / `scale_inv_t` the
columnwise copy quantized from xᵀ; `amax_row`, `amax_col` float32; `error` (mae | mse) and
`e4m3_max` for 4over6. `fp8_delayed`: `amax` float32 [steps] (step t's amax, written into history
entry 0 before the update, as TE's quantizer does), `fp8_max`, `margin`, `amax_history_len`,
`amax_compute_algo`, `initial_scale` (1; the history starts all zero), and after each step's
update `scale` float32 [steps] and `history` float32 [steps, amax_history_len] (entry 0 first).

Where TE's Python references differ from its CUDA kernels (the kernels are followed; the golden
test checks these differences as documented): for an amax of Inf the scale rule gives scale 0
(scale_inv Inf) and for NaN a NaN scale (0.5 with power-of-2 scales), the kernel's
`compute_scale_from_amax` gives 1 for both; `CurrentScalingQuantizerRef` replaces an infinite
fp8_max / amax by the input type's max (bf16: 3.3895e38) where the kernel
(`current_scaling.cu`) and `ref_per_tensor_cs` use FLT_MAX; TE's reference encodes an exact -0.0
as E2M1 code 0x0. Delayed scaling's Python update differs from TE's fused CUDA update
(`common/recipe/delayed_scaling.cu`, the default path): it rolls the history even for a step whose
amax is 0, its `max` propagates a NaN of the window (the kernel's fmaxf drops it), and its
(fp8_max / amax) / 2^margin is evaluated by torch as fp8_max * fp32(1 / amax), an ulp from the
kernel's (fp8_max * 2^-margin) / amax at times. The library offers both
(`delayed_scaling::unfused_update`); the golden test checks the unfused rule (history and scale)
on every case, and the fused rule's history on the sequences without a zero amax.
"""


def write_readme(out_dir):
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(README)


# ---------------------------------------------------------------- producing

class Writer:
    def __init__(self, out_dir, dry):
        self.out_dir, self.dry = out_dir, dry
        self.cases, self.files, self.count = [], [], {}
        os.makedirs(out_dir, exist_ok=True)

    def save(self, name, array):
        fname = PREFIX + name + ".npy"
        array = np.ascontiguousarray(array)
        np.save(os.path.join(self.out_dir, fname), array)
        self.files.append(fname)
        return fname

    def case(self, kind, **fields):
        n = self.count.get(kind, 0)
        self.count[kind] = n + 1
        fields = {"kind": kind, **fields}
        self.cases.append(fields)
        return f"{kind.split()[0]}{n}"


def guarded(w, section, notes):
    """Runs one section; on an error its cases and files are dropped and the error noted."""
    import traceback
    n_cases, n_files = len(w.cases), len(w.files)
    try:
        section()
    except Exception:  # noqa: BLE001 -- one failing reference must not lose the others
        notes.append(f"{section.__doc__}: FAILED\n" + traceback.format_exc())
        for fname in w.files[n_files:]:
            os.remove(os.path.join(w.out_dir, fname))
        del w.cases[n_cases:], w.files[n_files:]


def u8(t):
    """An FP8 / packed-FP4 / uint8 torch tensor as a numpy uint8 array."""
    import torch
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        t = t.view(torch.uint8)
    return t.contiguous().cpu().numpy().astype(np.uint8)


def f32(t):
    import torch
    return t.to(torch.float32).contiguous().cpu().numpy().astype(np.float32)


def produce(te_dir, out_dir, dry):
    w = Writer(out_dir, dry)
    inputs = make_inputs()
    input_files = {name: w.save("x_" + name, x) for name, (x, _, _) in inputs.items()}
    if not dry:
        import torch
        torch.manual_seed(0)
        te = load_te(te_dir, torch)
        fp8_dtype = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
        te_dtype = {"e4m3": te["DType"].kFloat8E4M3, "e5m2": te["DType"].kFloat8E5M2}

    def tensor(name):
        x, dtype, _ = inputs[name]
        t = torch.from_numpy(x.copy())
        return t.to(torch.bfloat16) if dtype == "bf16" else t

    def base(name):
        x, dtype, dist = inputs[name]
        return {"input": input_files[name], "dtype": dtype, "dist": name, "shape": list(x.shape)}

    notes = []

    def section_0():
        """fp8_scale: scale_from_amax_tensor on a list of amax values."""
        amaxes = amax_list()
        amax_file = w.save("amax_values", amaxes)
        for fmt in ("e4m3", "e5m2"):
            for pow2 in (False, True):
                for eps in (0.0, 1e-3):
                    for xdt in ("fp32", "bf16"):
                        tag = w.case("fp8_scale", format=fmt, pow2=pow2, eps=eps, input_dtype=xdt, amax=amax_file)
                        if dry:
                            scale = scale_inv = np.zeros_like(amaxes)
                        else:
                            s, si, _ = te["qsc"].scale_from_amax_tensor(
                                torch.float32 if xdt == "fp32" else torch.bfloat16, torch.from_numpy(amaxes.copy()),
                                fp8_dtype[fmt], eps=eps, pow_2_scales=pow2)
                            scale, scale_inv = f32(s), f32(si)
                        w.cases[-1].update(scale=w.save(tag + "_scale", scale), scale_inv=w.save(tag + "_scale_inv", scale_inv))

    def section_1():
        """fp8_current: per-tensor current scaling."""
        cur = [(n, f, p, 0.0) for n in ("normal", "mixed", "fp32", "tiny", "zero", "near_max", "huge")
               for f in ("e4m3", "e5m2") for p in (False, True)]
        cur += [("normal", "e4m3", False, 100.0), ("tiny", "e4m3", False, 1e-30), ("tiny", "e5m2", True, 1e-30)]
        for name, fmt, pow2, eps in cur:
            tag = w.case("fp8_current", format=fmt, pow2=pow2, eps=eps, **base(name))
            x, _, _ = inputs[name]
            if dry:
                data, scale_inv, custom = np.zeros(x.shape, np.uint8), np.zeros(1, np.float32), None
            else:
                qx, sx, _, _ = te["pcs"].ref_per_tensor_cs_cast(tensor(name), te_dtype[fmt], return_transpose=False,
                                                               force_pow_2_scales=pow2, amax_epsilon=eps)
                data, scale_inv = u8(qx), f32(sx).reshape(1)
                # TE's second Python reference (the custom-recipe quantizer) on the same input.
                q = te["cs"].CurrentScalingQuantizerRef(fp8_dtype[fmt], rowwise=True, columnwise=False,
                                                         pow_2_scales=pow2, eps=eps)
                r = q.quantize(tensor(name))
                same = np.array_equal(u8(r.data), data) and f32(r.scale).reshape(1).view(np.uint32)[0] == scale_inv.view(np.uint32)[0]
                custom = None if same else float(f32(r.scale).reshape(1)[0])
                if custom is not None:
                    notes.append(f"fp8_current {name} {fmt} pow2={pow2}: CurrentScalingQuantizerRef scale_inv {custom!r} "
                                 f"vs ref_per_tensor_cs {float(scale_inv[0])!r}")
            w.cases[-1].update(data=w.save(tag + "_data", data), scale_inv=w.save(tag + "_scale_inv", scale_inv))
            if custom is not None:
                w.cases[-1]["custom_recipe_ref_scale_inv"] = custom

    def section_2():
        """fp8_block: Float8BlockScaling."""
        blk1 = [(n, f, True) for n in ("normal", "edge", "fp32", "tiny", "zero", "huge", "near_max") for f in ("e4m3", "e5m2")]
        blk1 += [(n, "e4m3", False) for n in ("normal", "edge", "tiny")]
        blk2 = [(n, f, True) for n in ("edge", "normal", "huge", "zero") for f in ("e4m3", "e5m2")]
        blk2 += [(n, "e4m3", False) for n in ("edge", "tiny")]
        for mode, plan in (("1x128", blk1), ("128x128", blk2)):
            tile = (1, 128) if mode == "1x128" else (128, 128)
            for name, fmt, pow2 in plan:
                tag = w.case("fp8_block", mode=mode, format=fmt, pow2=pow2, eps=0.0, **base(name))
                x, _, _ = inputs[name]
                m, n = x.shape
                want_t = mode == "1x128" and name in ("normal", "edge", "fp32", "tiny")
                if dry:
                    br = 1 if mode == "1x128" else (m + 127) // 128
                    data, scale = np.zeros((m, n), np.uint8), np.zeros((br, (n + 127) // 128), np.float32)
                    data_t, scale_t = np.zeros((n, m), np.uint8), np.zeros((n, (m + 127) // 128), np.float32)
                else:
                    r = te["bqr"].BlockwiseQuantizerReference().quantize(
                        tensor(name), fp8_dtype[fmt], return_transpose=True, eps=0.0, pow_2_scales=pow2,
                        quant_tile_shape=tile, munge_scale_shapes=False)
                    data, scale, data_t, scale_t = u8(r.data), f32(r.scale), u8(r.data_t), f32(r.scale_t)
                    if mode == "128x128":
                        # The columnwise copy of a square-tiled tensor is the transpose (the reference says so).
                        assert np.array_equal(data_t, data.T) and np.array_equal(scale_t, scale.T)
                w.cases[-1].update(data=w.save(tag + "_data", data), scale_inv=w.save(tag + "_scale_inv", scale))
                if want_t:
                    w.cases[-1].update(data_t=w.save(tag + "_data_t", data_t), scale_inv_t=w.save(tag + "_scale_inv_t", scale_t))

    def section_3():
        """mxfp8_te: 1x32 blocks by TE's E8M0 rule, rowwise and columnwise from the input."""
        def mxfp8(t, fmt):
            fp8_max = 448.0 if fmt == "e4m3" else 57344.0
            ns = te["mx"][fp8_max]
            m, n = t.shape
            pad = (-n) % 32
            tp = torch.nn.functional.pad(t, (0, pad)) if pad else t  # zeros change no amax
            blocks = tp.view(m, (n + pad) // 32, 32)
            amax = torch.amax(torch.abs(blocks.to(torch.float32)), dim=-1)
            e8m0 = ns["_float_to_e8m0"](amax)
            scale_inv = ns["_e8m0_to_scale_inv"](e8m0)
            exact = np.ldexp(np.float32(1), u8(e8m0).astype(np.int32) - 127).astype(np.float32)
            if not np.array_equal(f32(scale_inv), exact):
                notes.append(f"mxfp8_te {fmt}: _e8m0_to_scale_inv is not exactly 2^(e-127) on this torch")
            q = (blocks.to(torch.float32) / scale_inv[:, :, None]).to(fp8_dtype[fmt]).reshape(m, n + pad)[:, :n]
            return u8(q), u8(e8m0)

        for name in ("normal", "mixed", "fp32", "tiny", "zero", "huge", "near_max"):
            for fmt in ("e4m3", "e5m2"):
                tag = w.case("mxfp8_te", format=fmt, **base(name))
                x, _, _ = inputs[name]
                m, n = x.shape
                if dry:
                    data, scale = np.zeros((m, n), np.uint8), np.zeros((m, (n + 31) // 32), np.uint8)
                    data_t, scale_t = np.zeros((n, m), np.uint8), np.zeros((n, (m + 31) // 32), np.uint8)
                else:
                    t = tensor(name)
                    data, scale = mxfp8(t, fmt)
                    data_t, scale_t = mxfp8(t.t().contiguous(), fmt)
                w.cases[-1].update(data=w.save(tag + "_data", data), scale=w.save(tag + "_scale", scale),
                                   data_t=w.save(tag + "_data_t", data_t), scale_t=w.save(tag + "_scale_t", scale_t))

    def section_4():
        """NVFP4 4over6 and row-scaled NVFP4 through NVFP4QuantizerRef."""
        def nvfp4(name, tile, **options):
            x, _, _ = inputs[name]
            m, n = x.shape
            if dry:
                z = lambda r, c: np.zeros((r, c), np.uint8)  # noqa: E731
                return {"data": z(m, n // 2), "scale": z(m, n // 16), "data_t": z(n, m // 2), "scale_t": z(n, m // 16),
                        "amax_row": np.zeros(m if options.get("row_scaled_nvfp4") else 1, np.float32),
                        "amax_col": np.zeros(n if options.get("row_scaled_nvfp4") else 1, np.float32)}
            nv = te["nv"]
            q = nv.NVFP4QuantizerRef(dtype=nv.reference_utils.Fp4Formats.E2M1, rowwise=True, columnwise=True,
                                     quant_tile_shape=tile, **options)
            r = q.quantize(tensor(name))
            return {"data": u8(r.data), "scale": u8(r.scale), "data_t": u8(r.data_t), "scale_t": u8(r.scale_t),
                    "amax_row": f32(r.global_amax_row).reshape(-1), "amax_col": f32(r.global_amax_col).reshape(-1)}

        fos = [("1x16", n, e, b) for n in ("normal", "mixed", "fp32", "zero", "huge") for e in ("MAE", "MSE") for b in (256, 448)]
        fos += [("16x16", n, e, b) for n in ("normal", "fp32", "zero") for e, b in (("MAE", 256), ("MSE", 256), ("MAE", 448))]
        for mode, name, err, bound in fos:
            tag = w.case("nvfp4_4over6", mode=mode, error=err.lower(), e4m3_max=bound, **base(name))
            tile = (1, 16) if mode == "1x16" else (16, 16)
            res = nvfp4(name, tile, nvfp4_use_4over6=True, nvfp4_4over6_err_mode=err, nvfp4_e4m3_max=bound)
            w.cases[-1].update({k: w.save(f"{tag}_{k}", v) for k, v in res.items()})

        for mode, name in [(m, n) for m in ("plain", "4over6") for n in ("normal", "mixed", "fp32", "tiny")]:
            extra = {"error": "mae", "e4m3_max": 256} if mode == "4over6" else {}
            tag = w.case("nvfp4_row_scaled", mode=mode, **extra, **base(name))
            options = {"row_scaled_nvfp4": True}
            if mode == "4over6":
                options.update(nvfp4_use_4over6=True, nvfp4_4over6_err_mode="MAE", nvfp4_e4m3_max=256)
            res = nvfp4(name, (1, 16), **options)
            w.cases[-1].update({k: w.save(f"{tag}_{k}", v) for k, v in res.items()})

    def section_5():
        """fp8_delayed: delayed scaling's amax history and scale, stepped."""
        for seq_name, amaxes in delayed_sequences().items():
            seq_file = w.save("delayed_amax_" + seq_name, amaxes)
            for fmt, fp8_max in (("e4m3", 448.0), ("e5m2", 57344.0)):
                for length in (1, 4, 16):
                    for algo in ("max", "most_recent"):
                        for margin in (0, 2, -1):
                            tag = w.case("fp8_delayed", sequence=seq_name, format=fmt, fp8_max=fp8_max,
                                         amax_history_len=length, amax_compute_algo=algo, margin=margin,
                                         amax=seq_file, initial_scale=1.0)
                            steps = len(amaxes)
                            if dry:
                                scales, histories = np.zeros(steps, np.float32), np.zeros((steps, length), np.float32)
                            else:
                                recipe = types.SimpleNamespace(amax_compute_algo=algo, scaling_factor_compute_algo=None,
                                                               margin=margin)
                                history = torch.zeros((length, 1), dtype=torch.float32)  # TE's initial state
                                scale = torch.ones(1, dtype=torch.float32)
                                scales, histories = [], []
                                for a in amaxes:
                                    history[0, 0] = float(a)  # what the step's quantizer writes
                                    te["delayed"]["_amax_and_scale_update"](history, scale, fp8_max, recipe)
                                    scales.append(f32(scale).reshape(1)[0])
                                    histories.append(f32(history[:, 0]))
                                scales, histories = np.array(scales, np.float32), np.stack(histories)
                            w.cases[-1].update(scale=w.save(tag + "_scale", scales),
                                               history=w.save(tag + "_history", histories))

    for section in (section_0, section_1, section_2, section_3, section_4, section_5):
        guarded(w, section, notes)

    write_readme(out_dir)
    with open(os.path.join(out_dir, "manifest_fragment.json"), "w") as f:
        json.dump(w.cases, f, indent=0)
    info = {"inputs": {k: v[2] for k, v in inputs.items()}, "cases": len(w.cases),
            "per_kind": {k: sum(c["kind"] == k for c in w.cases) for k in w.count},
            "npy_bytes": sum(os.path.getsize(os.path.join(out_dir, f)) for f in w.files), "notes": notes, "dry": dry}
    if not dry:
        info["torch"] = torch.__version__
        commit = os.path.join(te_dir, "COMMIT")
        info["te_commit"] = open(commit).read().strip() if os.path.exists(commit) else None
    with open(os.path.join(out_dir, "producer_info.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    produce(args[0], args[1], "--dry" in sys.argv)
