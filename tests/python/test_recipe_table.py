# The recipe classes' field tables (include/nvfp4/recipes/recipe_fields.hpp, one per recipe struct)
# against what is built from them and beside them: the extension's classes (nvfp4.DelayedScaling,
# ...: made from the tables by python/bind_nn.cpp) and nvfp4.torch's TE-compatible classes
# (nvfp4.common.recipe). A field added to a struct's table without the torch class learning it, a
# TE field the torch class has that the library neither runs nor lists as GPU-only, or a default
# that differs, fails here.
import dataclasses

import pytest

import nvfp4

from nvfp4.common import recipe as te_recipe  # noqa: E402

LIBRARY_CLASSES = ["DelayedScaling", "Float8CurrentScaling", "Float8BlockScaling", "MXFP8BlockScaling", "NVFP4BlockScaling"]

# Fields of TE's classes that steer GPU-side machinery this library has no counterpart for, or that
# the torch class maps onto other library fields (use_f32_scales: QParams.power_2_scale): the torch
# class has them, the library's table does not. A new TE field must be added to the table or here.
NOT_IN_TABLE = {
    "DelayedScaling": {"scaling_factor_compute_algo", "fp8_dpa", "fp8_mha", "backward_override"},
    "Float8CurrentScaling": {"fp8_dpa", "fp8_mha", "backward_override"},
    "Float8BlockScaling": {"use_f32_scales", "fp8_dpa", "fp8_mha", "backward_override"},
    "MXFP8BlockScaling": {"fp8_dpa", "fp8_mha", "backward_override"},
    "NVFP4BlockScaling": {"fp4_format", "fp8_format", "fp8_dpa", "fp8_mha", "backward_override"},
}

ENV = ["NVTE_BACKWARD_OVERRIDE", "NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES", "NVTE_FP8_BLOCK_SCALING_FP32_SCALES", "NVTE_NVFP4_DISABLE_RHT",
       "NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING", "NVTE_NVFP4_DISABLE_2D_QUANTIZATION", "NVTE_NVFP4_ROW_SCALED_ACTIVATION", "NVTE_NVFP4_4OVER6",
       "NVTE_NVFP4_4OVER6_E4M3_USE_256", "NVTE_NVFP4_4OVER6_ERR_MODE"]


@pytest.fixture
def te_defaults(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def same_value(library, te):
    """A library field's value against the torch class's: enums by name, MMParams / QParams by field."""
    if isinstance(library, str):
        te_text = te.name if hasattr(te, "name") else str(te)
        return library.lower() == te_text.lower()
    if isinstance(library, nvfp4.MMParams):
        return library.use_split_accumulator == te.use_split_accumulator
    if isinstance(library, nvfp4.QParams):
        return library.power_2_scale == te.power_2_scale and library.amax_epsilon == te.amax_epsilon
    return library == te


@pytest.mark.parametrize("name", LIBRARY_CLASSES)
def test_every_te_field_of_the_table_is_on_the_torch_class_with_its_default(name, te_defaults):
    library_class, te_class = getattr(nvfp4, name), getattr(te_recipe, name)
    library, te = library_class(), te_class()
    rows = library_class.fields()
    assert rows, name
    for field, origin, what in rows:
        assert origin in ("te", "library") and what, (name, field)
        if origin != "te":
            continue
        assert hasattr(te, field), f"{name}.{field} is a TE field in the library's table, but nvfp4.common.recipe.{name} lacks it"
        assert same_value(getattr(library, field), getattr(te, field)), \
            f"{name}.{field}: library default {getattr(library, field)!r}, torch class default {getattr(te, field)!r}"


@pytest.mark.parametrize("name", LIBRARY_CLASSES)
def test_every_field_of_the_torch_class_is_in_the_table_or_listed_as_gpu_only(name):
    te_fields = {f.name for f in dataclasses.fields(getattr(te_recipe, name))}
    table = {field for field, origin, _ in getattr(nvfp4, name).fields() if origin == "te"}
    unknown = te_fields - table - NOT_IN_TABLE[name]
    assert not unknown, f"nvfp4.common.recipe.{name} has {sorted(unknown)}: add them to the C++ table or to NOT_IN_TABLE"
    stale = NOT_IN_TABLE[name] & table
    assert not stale, f"{sorted(stale)} are in the table now: drop them from NOT_IN_TABLE"


def test_the_extension_classes_are_made_from_the_tables():
    # Every row is a property of the class, keyword construction takes exactly the rows, and the
    # repr names every row.
    for name in LIBRARY_CLASSES + ["NoQuantization"]:
        cls = getattr(nvfp4, name)
        rows = [row[0] for row in cls.fields()]
        obj = cls()
        for field in rows:
            assert hasattr(obj, field), (name, field)
            assert f"{field}=" in repr(obj), (name, field)
        with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_field'"):
            cls(no_such_field=1)
    r = nvfp4.DelayedScaling(margin=2.0, amax_history_len=16, fp8_format="e4m3")
    assert (r.margin, r.amax_history_len, r.fp8_format) == (2.0, 16, "E4M3")
    r.fp8_gemm_fprop.use_split_accumulator = True  # struct fields by reference: the recipe changes
    assert r.fp8_gemm_fprop.use_split_accumulator is True
    b = nvfp4.Float8BlockScaling(fp8_quant_fwd_inp=nvfp4.QParams(power_2_scale=False, amax_epsilon=1e-3))
    assert b.fp8_quant_fwd_inp.power_2_scale is False
    with pytest.raises(nvfp4.Error):
        nvfp4.DelayedScaling(amax_history_len=10**9).validate()  # bounded (issue 39 item 9)
