# Bad input to nvfp4.torch raises a clear Python error (TypeError / ValueError naming the fix) and
# leaves the layer usable: non-CPU tensors, float64 / float16, wrong shapes, recipes TE rejects,
# arguments only a GPU cluster has.
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402
from nvfp4.torch import extras  # noqa: E402

from nvfp4.common import recipe as R  # noqa: E402


def test_non_cpu_tensors_are_refused():
    layer = te.Linear(16, 8)
    with pytest.raises(ValueError, match="CPU"):
        layer(torch.empty(4, 16, device="meta"))
    with pytest.raises(ValueError, match="device='cpu'"):
        te.Linear(16, 8, device="cuda")
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="CPU"):
            layer(torch.randn(4, 16, device="cuda"))
        with pytest.raises(ValueError, match="CPU"):
            extras.functional.quantize(torch.randn(4, 32, device="cuda"))
    assert layer(torch.randn(4, 16)).shape == (4, 8)  # still usable


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32])  # float16 is TE's too (tests/python/test_torch_te_compat.py)
def test_unsupported_dtypes_are_refused(dtype):
    layer = te.Linear(16, 8)
    with pytest.raises(TypeError, match="float32|bfloat16"):
        layer(torch.ones(4, 16, dtype=dtype))
    with pytest.raises(TypeError, match="float32"):
        extras.functional.quantize(torch.ones(4, 32, dtype=dtype))
    with pytest.raises(TypeError, match="params_dtype"):
        te.Linear(16, 8, params_dtype=torch.float64)


def test_wrong_shapes_are_refused():
    layer = te.Linear(16, 8)
    with pytest.raises(ValueError, match="in_features"):
        layer(torch.randn(4, 15))
    with pytest.raises(ValueError, match="2-D"):
        extras.functional.quantize(torch.randn(2, 4, 32))
    with pytest.raises(ValueError, match="positive"):
        te.Linear(0, 8)


def test_recipes_te_rejects_are_refused():
    with pytest.raises(ValueError, match="E5M2"):
        R.DelayedScaling(fp8_format=R.Format.E5M2)
    with pytest.raises(ValueError, match="E5M2"):
        R.Float8CurrentScaling(fp8_format=R.Format.E5M2)
    with pytest.raises(ValueError, match="2D by 2D"):
        R.Float8BlockScaling(x_block_scaling_dim=2)
    with pytest.raises(ValueError, match="Split accumulator"):
        R.Float8BlockScaling(fp8_gemm_fprop=R.MMParams(use_split_accumulator=False))
    with pytest.raises(ValueError, match="E4M3"):
        R.NVFP4BlockScaling(fp8_format=R.Format.HYBRID)
    with pytest.raises(ValueError, match="backward_override"):
        R.DelayedScaling(backward_override="high_precision")
    with pytest.raises(TypeError, match="recipe"):
        with te.autocast(recipe="nvfp4"):
            pass


def test_recipe_fields_the_library_cannot_honour_are_refused_when_used():
    layer = te.Linear(32, 32)
    x = torch.randn(32, 32)  # TE's FP8 shape rules hold (MXFP8: 32s)
    with pytest.raises(ValueError, match="scaling_factor_compute_algo"):
        with te.autocast(recipe=R.DelayedScaling(scaling_factor_compute_algo=lambda *a: a[1])):
            layer(x)
    with pytest.raises(ValueError, match="amax_compute_algo"):
        with te.autocast(recipe=R.DelayedScaling(amax_compute_algo=lambda history: history.max())):
            layer(x)
    with te.autocast(recipe=R.MXFP8BlockScaling()):
        assert layer(x).shape == (32, 32)  # a failed call changed nothing


def test_gpu_cluster_arguments_are_refused():
    # Tensor / sequence parallelism run as TE's (tests/python/test_torch_distributed.py); one rank
    # turns sequence parallelism off, and tp_size > 1 without a group fails at the forward, as TE's.
    assert te.Linear(16, 8, sequence_parallel=True).sequence_parallel is False
    with pytest.raises(RuntimeError, match="Tensor parallel group not initialized"):
        te.LayerNormLinear(16, 8, tp_size=2)(torch.randn(2, 16))
    with pytest.raises(ValueError, match="ub_overlap_ag"):
        te.Linear(16, 8, ub_overlap_ag=True)
    assert te.Linear(16, 8, tp_size=1, sequence_parallel=False, fuse_wgrad_accumulation=False).in_features == 16
    with pytest.raises(TypeError, match="unexpected keyword"):
        te.Linear(16, 8, no_such_argument=1)
    with pytest.raises(ValueError, match="fp8_output"):
        te.Linear(16, 8)(torch.randn(2, 16), fp8_output=True)
    with pytest.raises(ValueError, match="is_first_microbatch"):
        te.Linear(16, 8)(torch.randn(2, 16), is_first_microbatch="yes")
    with pytest.raises(ValueError, match="activation"):
        te.LayerNormMLP(16, 32, activation="nope")


def test_optimizer_arguments_are_checked():
    p = torch.nn.Parameter(torch.zeros(4, 4))
    with pytest.raises(ValueError, match="state_dtype"):
        extras.optim.AdamW([p], state_dtype="float16")
    with pytest.raises(ValueError, match="betas"):
        extras.optim.AdamW([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="state_dtype"):
        extras.optim.Muon([p], state_dtype="int8")
