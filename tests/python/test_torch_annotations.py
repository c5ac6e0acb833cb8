# The package ships py.typed, so its public Python surface carries annotations (issue 44 item 4):
# every public function, method and constructor of the modules below annotates each parameter
# (self / cls / *args / **kwargs aside) and its return, and typing.get_type_hints resolves every
# annotation (the strings name real things; the modules use `from __future__ import annotations`,
# so nothing is evaluated at import).
import importlib
import inspect
import typing

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch  # noqa: E402,F401
from nvfp4.torch._roles import QuantizerRole  # noqa: E402
from nvfp4.torch.module._linear_unit import LinearUnit  # noqa: E402
from nvfp4.torch.quantized_tensor import QuantizedTensor, Quantizer  # noqa: E402
from nvfp4.common.recipe import Recipe  # noqa: E402

MODULES = [
    "nvfp4.common", "nvfp4.common.recipe",
    "nvfp4.torch.quantization", "nvfp4.torch._model_init", "nvfp4.torch._amax_reduction", "nvfp4.torch.distributed",
    "nvfp4.torch.quantized_tensor", "nvfp4.torch.tensor", "nvfp4.torch.tensor.float8_tensor",
    "nvfp4.torch.tensor.mxfp8_tensor", "nvfp4.torch.tensor.float8_blockwise_tensor", "nvfp4.torch.tensor.nvfp4_tensor",
    "nvfp4.torch._tensors", "nvfp4.torch._roles", "nvfp4.torch.constants",
    "nvfp4.torch.extras.optim", "nvfp4.torch.extras.functional",
    "nvfp4.torch.module.layernorm", "nvfp4.torch.module.rmsnorm",
    "nvfp4.torch.module.linear", "nvfp4.torch.module.layernorm_linear", "nvfp4.torch.module.layernorm_mlp",
    "nvfp4.torch.module.grouped_linear", "nvfp4.torch.module.base", "nvfp4.torch.module._te_module",
    "nvfp4.torch.module._parallel", "nvfp4.torch.module._linear_unit", "nvfp4.torch.module._te_checks",
    "nvfp4.torch.module._te_extra_state",
    "nvfp4.torch.attention.dot_product_attention.dot_product_attention",
    "nvfp4.torch.attention.dot_product_attention.backends", "nvfp4.torch.attention.dot_product_attention.utils",
    "nvfp4.torch.attention.multi_head_attention", "nvfp4.torch.attention.rope", "nvfp4.torch.transformer",
]

# Names the modules import only under `if TYPE_CHECKING:` (annotating must not add run-time
# imports: _amax_reduction / distributed / module._te_module name te.Linear's LinearUnit, tensor names
# QuantizerRole, module._parallel / module._te_module name Recipe, Quantizer and QuantizedTensor);
# get_type_hints is given them here.
TYPE_CHECKING_NAMES = {"LinearUnit": LinearUnit, "QuantizerRole": QuantizerRole, "Quantizer": Quantizer,
                       "QuantizedTensor": QuantizedTensor, "Recipe": Recipe}

# Dunders that are part of a public class's protocol (constructors, call, context manager).
PROTOCOL_DUNDERS = ("__init__", "__new__", "__call__", "__enter__", "__exit__")


def _function(attr):
    """The plain function behind a class attribute (static / class methods, property getters and
    setters), or None for anything that is not one of ours."""
    if isinstance(attr, (staticmethod, classmethod)):
        attr = attr.__func__
    if isinstance(attr, property):
        return [f for f in (attr.fget, attr.fset) if f is not None]
    return [attr] if inspect.isfunction(attr) else []


def public_callables(module_name):
    """{qualified name: function} of the public functions defined in the module and the public
    methods and constructors of its public classes, including those inherited from classes of the
    modules under test (te.LayerNorm's constructor is _Norm's). Names re-exported from modules
    outside MODULES are not counted here."""
    module = importlib.import_module(module_name)
    ours = set(MODULES)
    found = {}
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) not in ours:
            continue
        if inspect.isfunction(obj):
            found[f"{obj.__module__}.{obj.__qualname__}"] = obj
        elif inspect.isclass(obj):
            for base in obj.__mro__:
                if base.__module__ not in ours:
                    continue
                for attr_name, attr in vars(base).items():
                    if attr_name.startswith("_") and attr_name not in PROTOCOL_DUNDERS:
                        continue
                    for fn in _function(attr):
                        if fn.__module__ == base.__module__:  # not Enum.__new__, which enum copies into each enum class
                            found[f"{base.__module__}.{fn.__qualname__}"] = fn
    return found


def missing_annotations(fn):
    """The parameters (and 'return') of fn that carry no annotation."""
    signature = inspect.signature(fn, eval_str=False)
    missing = [p.name for i, p in enumerate(signature.parameters.values())
               if p.annotation is inspect.Parameter.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               and not (i == 0 and p.name in ("self", "cls"))]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


@pytest.mark.parametrize("module_name", MODULES)
def test_public_callables_are_fully_annotated(module_name):
    problems = {name: missing_annotations(fn) for name, fn in public_callables(module_name).items()}
    problems = {name: missing for name, missing in problems.items() if missing}
    assert not problems, f"unannotated parameters / returns: {problems}"


@pytest.mark.parametrize("module_name", MODULES)
def test_annotations_resolve(module_name):
    unresolved = {}
    for name, fn in public_callables(module_name).items():
        try:
            typing.get_type_hints(fn, localns=TYPE_CHECKING_NAMES)
        except Exception as e:  # noqa: BLE001 - any failure to evaluate is the finding
            unresolved[name] = f"{type(e).__name__}: {e}"
    assert not unresolved, f"annotations that do not resolve: {unresolved}"


def test_the_walk_reaches_the_public_surface():
    """The two checks above cannot pass by finding nothing: the walk reaches TE's public entry
    points of each module, inherited constructors and methods included."""
    seen = set()
    for module_name in MODULES:
        seen |= set(public_callables(module_name))
    expected = [
        "nvfp4.torch.quantization.autocast.__init__", "nvfp4.torch.quantization.autocast.__exit__",
        "nvfp4.torch.quantization.fp8_autocast", "nvfp4.torch.quantization.is_fp8_available",
        "nvfp4.torch._model_init.quantized_model_init", "nvfp4.common.recipe.to_library",
        "nvfp4.common.recipe.Recipe.nvfp4", "nvfp4.common.recipe.DelayedScaling.__init__",
        "nvfp4.torch.distributed.checkpoint",
        "nvfp4.torch.distributed.CudaRNGStatesTracker.fork", "nvfp4.torch._amax_reduction.end_forward",
        "nvfp4.torch.quantized_tensor.Quantizer.quantize", "nvfp4.torch.quantized_tensor.QuantizedTensor.__new__",
        "nvfp4.torch.quantized_tensor.QuantizedTensor.dequantize", "nvfp4.torch.tensor.NVFP4Quantizer.__init__",
        "nvfp4.torch.tensor.resolve_custom_recipe", "nvfp4.torch.constants.DType.cast",
        "nvfp4.torch._roles.linear_roles", "nvfp4.torch._tensors.from_core",
        "nvfp4.torch.extras.optim.AdamW.step", "nvfp4.torch.extras.optim._LowPrecisionStateOptimizer.load_state_dict",
        "nvfp4.torch.extras.functional.quantize", "nvfp4.torch.module.layernorm._Norm.__init__",
        "nvfp4.torch.module.layernorm._Norm.hidden_size",
        "nvfp4.torch.module.linear.Linear.__init__", "nvfp4.torch.module.linear.Linear.forward",
        "nvfp4.torch.module.linear.GemmModule.reset_parameters", "nvfp4.torch.module.linear.split_parameters",
        "nvfp4.torch.module.layernorm_linear.LayerNormLinear.__init__",
        "nvfp4.torch.module.layernorm_linear.LayerNormLinear.forward",
        "nvfp4.torch.module.layernorm_mlp.LayerNormMLP.__init__", "nvfp4.torch.module.layernorm_mlp.LayerNormMLP.forward",
        "nvfp4.torch.module.grouped_linear.GroupedLinear.__init__",
        "nvfp4.torch.module.grouped_linear.GroupedLinear.forward",
        "nvfp4.torch.module._te_module.TEModuleMixin.get_extra_state",
        "nvfp4.torch.module._te_module.TEModuleMixin.set_extra_state", "nvfp4.torch.module._te_module.run_gemm",
        "nvfp4.torch.module._parallel.TensorParallelModule.set_tensor_parallel_group",
        "nvfp4.torch.module._parallel.gather_along_first_dim", "nvfp4.torch.module._parallel.allreduce",
        "nvfp4.torch.module._parallel.TensorParallel.__init__", "nvfp4.torch.module._linear_unit.LinearUnit.__init__",
        "nvfp4.torch.module._linear_unit.LinearUnit.backward", "nvfp4.torch.module._te_checks.check_quantized_gemm",
        "nvfp4.torch.module._te_extra_state.read_state", "nvfp4.torch.module.base.size_argument",
        "nvfp4.torch.attention.dot_product_attention.dot_product_attention.DotProductAttention.__init__",
        "nvfp4.torch.attention.dot_product_attention.dot_product_attention.DotProductAttention.forward",
        "nvfp4.torch.attention.dot_product_attention.backends.attention",
        "nvfp4.torch.attention.dot_product_attention.utils.get_full_mask",
        "nvfp4.torch.attention.multi_head_attention.MultiheadAttention.__init__",
        "nvfp4.torch.attention.multi_head_attention.MultiheadAttention.forward",
        "nvfp4.torch.attention.rope.RotaryPositionEmbedding.forward", "nvfp4.torch.attention.rope.apply_rotary_pos_emb",
        "nvfp4.torch.transformer.TransformerLayer.__init__", "nvfp4.torch.transformer.TransformerLayer.forward",
        "nvfp4.torch.transformer.DropPath.forward",
    ]
    assert [name for name in expected if name not in seen] == []
    assert "nvfp4.torch.module.layernorm._Norm.__init__" in public_callables("nvfp4.torch.module.rmsnorm")
    # te.Linear's inherited surface (GemmModule, TEModuleMixin, TensorParallelModule) and the
    # tensor-parallel helpers nvfp4.torch.distributed re-exports are walked from their users too.
    assert "nvfp4.torch.module._parallel.TensorParallelModule.tp_group" in public_callables("nvfp4.torch.module.linear")
    assert "nvfp4.torch.module._parallel.gather_along_first_dim" in public_callables("nvfp4.torch.distributed")
    assert len(seen) >= 234  # the public callables walked when this was written: the walk does not shrink
