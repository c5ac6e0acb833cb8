# nvfp4.torch from several threads (issue 39 items 3 and 4): the autocast region state is per
# thread, as torch.autocast's is (a region in one thread does not reach another thread's layers,
# and exits in any order leave every thread outside any region); a layer shared by threads runs
# each call whole, so every call's output and gradients are the single-thread ones.
import sys
import threading

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as te_recipe  # noqa: E402


def _run_threads(targets):
    """Runs each callable in its own thread; re-raises the first exception."""
    errors = []

    def guarded(f):
        try:
            f()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(f,)) for f in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a thread hung"
    if errors:
        raise errors[0]


def test_a_region_does_not_reach_another_thread():
    inside, checked = threading.Event(), threading.Event()
    seen = {}

    def in_region():
        with te.autocast(recipe=te_recipe.MXFP8BlockScaling()):
            inside.set()
            checked.wait(timeout=30)

    def outside():
        inside.wait(timeout=30)
        seen["enabled"], seen["recipe"] = te.is_fp8_enabled(), te.get_fp8_recipe()
        checked.set()

    _run_threads([in_region, outside])
    assert seen["enabled"] is False
    assert isinstance(seen["recipe"], te_recipe.DelayedScaling)  # the default outside any region


def test_regions_exited_in_any_order_leave_every_thread_outside():
    """A enters, B enters, A exits, B exits: with one process-wide state B's exit restored A's
    'enabled' and is_fp8_enabled() stayed True for good."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a():
        with te.autocast(recipe=te_recipe.Float8CurrentScaling()):
            a_in.set()
            b_in.wait(timeout=30)
        a_out.set()

    def b():
        a_in.wait(timeout=30)
        with te.autocast(recipe=te_recipe.NVFP4BlockScaling()):
            b_in.set()
            a_out.wait(timeout=30)

    _run_threads([a, b])
    assert te.is_fp8_enabled() is False
    seen = []
    _run_threads([lambda: seen.append(te.is_fp8_enabled())])
    assert seen == [False]


def test_each_thread_computes_under_its_own_region_recipe():
    """Two threads in regions of different recipes at the same time, each with its own layer:
    each output is the one its own recipe gives in a single thread."""
    torch.manual_seed(0)
    recipes = {"current": te_recipe.Float8CurrentScaling(), "nvfp4": te_recipe.NVFP4BlockScaling()}
    layers = {name: te.Linear(64, 32, params_dtype=torch.bfloat16) for name in recipes}  # TE's NVFP4 RHT: bf16
    x = torch.randn(16, 64).to(torch.bfloat16)
    expected = {}
    for name, r in recipes.items():
        probe = te.Linear(64, 32, params_dtype=torch.bfloat16)
        probe.load_state_dict(layers[name].state_dict())
        with te.autocast(recipe=r), torch.no_grad():
            expected[name] = probe(x)
    both_in = threading.Barrier(2)
    got = {}

    def worker(name):
        def run():
            with te.autocast(recipe=recipes[name]):
                both_in.wait(timeout=30)  # both regions are open now
                with torch.no_grad():
                    got[name] = layers[name](x)
                both_in.wait(timeout=30)
        return run

    _run_threads([worker(name) for name in recipes])
    for name in recipes:
        assert torch.equal(got[name], expected[name]), name


# ---- one layer shared by threads -------------------------------------------------------------------

def _recipes():
    return {"none": None, "current": te_recipe.Float8CurrentScaling(), "block": te_recipe.Float8BlockScaling(),
            "mxfp8": te_recipe.MXFP8BlockScaling(),
            # without stochastic rounding: its seed is the layer's backward count, which the
            # threads' order decides (docs/errors.md, "The Python layer's guarantees")
            "nvfp4": te_recipe.NVFP4BlockScaling(disable_stochastic_rounding=True)}


def _forward(layer, x, recipe):
    """bf16 calls of the float32 layer under torch autocast (per thread, as TE's dtype rule needs)."""
    x = x.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=x.dtype == torch.bfloat16):
        with te.autocast(enabled=recipe is not None, recipe=recipe):
            return x, layer(x)


def _backward(layer, x, y, dy):
    return (y.detach(), *torch.autograd.grad(y, [x, layer.weight, layer.bias], dy))


THREADS, PAIRS = 8, 6


@pytest.mark.parametrize("pattern", ["pairs", "forwards_then_backwards"])
def test_one_layer_shared_by_8_threads_gives_single_thread_bits(pattern):
    """8 threads, each with its own recipe and input dtype, call one te.Linear: every call's y,
    dX, dW and db are the single-thread ones (were: 'no forward to differentiate' in 19-43 of 320
    pairs, or another call's gradients)."""
    torch.manual_seed(4)
    layer = te.Linear(64, 32)
    recipes = _recipes()
    plan = []
    for t in range(THREADS):
        recipe = list(recipes.values())[t % len(recipes)]
        dtype = torch.bfloat16 if t % 3 == 2 or isinstance(recipe, te_recipe.NVFP4BlockScaling) else torch.float32
        plan.append([(recipe, torch.randn(32, 64).to(dtype), torch.randn(32, 32).to(dtype)) for _ in range(PAIRS)])  # MXFP8: 32 rows
    expected = [[_backward(layer, *_forward(layer, x, r), dy) for r, x, dy in calls] for calls in plan]
    got = [[None] * PAIRS for _ in range(THREADS)]
    start = threading.Barrier(THREADS)

    def worker(t):
        def run():
            start.wait(timeout=60)
            if pattern == "pairs":
                for i, (r, x, dy) in enumerate(plan[t]):
                    got[t][i] = _backward(layer, *_forward(layer, x, r), dy)
            else:  # every forward first, then the backwards, last call first
                pending = [(_forward(layer, x, r), dy) for r, x, dy in plan[t]]
                for i in reversed(range(PAIRS)):
                    (x, y), dy = pending[i]
                    got[t][i] = _backward(layer, x, y, dy)
        return run

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over as often as possible: the most interleavings
    try:
        _run_threads([worker(t) for t in range(THREADS)])
    finally:
        sys.setswitchinterval(interval)
    for t in range(THREADS):
        for i in range(PAIRS):
            for what, g, e in zip(("y", "dx", "dw", "db"), got[t][i], expected[t][i]):
                assert g.dtype == e.dtype and torch.equal(g, e), (t, i, what)
