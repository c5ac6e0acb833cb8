# torch's contracts kept by nvfp4.torch's layers (issue 39 items 2, 5, 9 and the minor ones): each
# call's backward differentiates its own forward whatever calls, recipes, dtypes or in-place
# changes came between; retain_graph and create_graph behave as for torch.nn.Linear (a gradient
# under create_graph=True has a grad_fn, and differentiating it again raises); sizes and recipe
# fields are checked before anything is allocated.
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402
from nvfp4.torch.module import base as te_base  # noqa: E402


# ---- sizes ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [64.7, 64.0, "64", True, None, np.float32(8)])
def test_a_size_that_is_not_an_int_is_a_type_error(value):
    """TE hands its sizes to torch.empty, whose error for a float or a str is a TypeError."""
    if not isinstance(value, bool):  # torch.empty (and so TE, and torch.nn.Linear) reads True as 1; refused here
        with pytest.raises(TypeError):
            torch.empty(3, value)  # the peer's behaviour
    with pytest.raises(TypeError, match="in_features must be an int"):
        te_base.size_argument("Linear", "in_features", value)


def test_int_like_sizes_are_taken_and_non_positive_ones_refused():
    assert te_base.size_argument("Linear", "in_features", np.int64(48)) == 48
    assert type(te_base.size_argument("Linear", "in_features", np.int64(48))) is int
    for bad in (0, -3):
        with pytest.raises(ValueError, match="hidden_size must be positive"):
            te_base.size_argument("LayerNormMLP", "hidden_size", bad)
