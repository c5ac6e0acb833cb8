# nvfp4.LinearCore: one emulated TE Linear over parameters the caller owns (python/bind_nn.cpp).
# Bits against the C++ layer (tests/python/write_reference.cpp), delayed scaling's regions against
# TE's rules (scales computed here in numpy from the amaxes), the saved forward of each call (any
# order of forwards and backwards, recipe switches and scale updates between them, a backward run
# twice, a saved forward used from another thread), bad input, sizes and threads.
import threading

import numpy as np
import pytest

import nvfp4

E4M3_MAX, E5M2_MAX = np.float32(448.0), np.float32(57344.0)


@pytest.fixture
def data():
    rng = np.random.default_rng(21)
    return {"x": rng.standard_normal((32, 64)).astype(np.float32), "w": rng.standard_normal((16, 64)).astype(np.float32),
            "b": rng.standard_normal(16).astype(np.float32), "dy": rng.standard_normal((32, 16)).astype(np.float32)}


def delayed(history_len=4):
    r = nvfp4.DelayedScaling()
    r.amax_history_len = history_len
    return r


def amax(a):
    return np.float32(np.abs(a).max())


def test_core_gives_the_cpp_bits(reference_dir):
    arrays = {p.stem: np.load(p) for p in reference_dir.glob("*.npy")}
    core = nvfp4.LinearCore(256, 48, nvfp4.NVFP4BlockScaling(), seed=5)
    w = np.ascontiguousarray(arrays["b"])
    dw = np.full_like(w, np.nan)
    y, saved = core.forward(arrays["x"], w)
    assert y.tobytes() == arrays["linear_y"].tobytes()
    assert core.backward(saved, arrays["linear_dy"], dw).tobytes() == arrays["linear_dx"].tobytes()
    assert dw.tobytes() == arrays["linear_dw"].tobytes()
    assert core.steps == 1


@pytest.mark.parametrize("recipe", [None, nvfp4.NVFP4BlockScaling(), nvfp4.Float8CurrentScaling(), nvfp4.Float8BlockScaling(),
                                    nvfp4.MXFP8BlockScaling()], ids=lambda r: nvfp4.recipe_name(r))
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_core_equals_the_owning_linear(data, recipe, dtype):
    # Linear owns its parameters; both run nn::linear, so every recipe gives the same bits.
    layer = nvfp4.Linear(64, 16, recipe, bias=True, dtype=dtype, seed=3)
    layer.weight[:], layer.bias[:] = data["w"], data["b"]
    core = nvfp4.LinearCore(64, 16, recipe, bias=True, dtype=dtype, seed=3)
    dw, db = np.zeros_like(data["w"]), np.zeros_like(data["b"])
    y, saved = core.forward(data["x"], data["w"], data["b"])
    assert y.tobytes() == layer.forward(data["x"]).tobytes()
    assert core.backward(saved, data["dy"], dw, db).tobytes() == layer.backward(data["dy"]).tobytes()
    assert dw.tobytes() == layer.weight_grad.tobytes() and db.tobytes() == layer.bias_grad.tobytes()


def test_parameters_are_read_in_place_and_gradients_written_in_place(data):
    x, w, b = data["x"], data["w"].copy(), data["b"]
    core = nvfp4.LinearCore(64, 16, bias=True)  # no quantization, fp32
    assert np.allclose(core.forward(x, w, b)[0], x @ w.T + b, rtol=1e-5, atol=1e-5)
    w *= 2  # the caller's array, changed in place: the next call reads it
    y, saved = core.forward(x, w, b)
    assert np.allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-5)
    dy = np.ones((32, 16), np.float32)
    dw, db = np.full_like(w, np.nan), np.full(16, np.nan, np.float32)
    dx = core.backward(saved, dy, dw, db)
    assert np.allclose(dx, dy @ w, rtol=1e-5, atol=1e-5)
    assert np.allclose(dw, dy.T @ x, rtol=1e-5, atol=1e-4)
    assert np.array_equal(db, np.full(16, 32, np.float32))  # the sum of dY's rows, exact


def test_one_scale_per_forward_region(data):
    # TE (pytorch/quantization.py, the outermost autocast's exit -> reduce_and_update_fp8_tensors):
    # the forward roles' scales update once per region, so two calls in one region use one scale,
    # and their amaxes are max-merged into one history entry.
    x, w = data["x"], data["w"]
    core = nvfp4.LinearCore(64, 16, delayed())
    first, _ = core.forward(x, w)
    core.end_forward_region(True)  # scale 1 -> 448 / amax(x)
    (y1, _), (y2, _) = core.forward(x, w), core.forward(3 * x, w)
    assert core.forward(x, w)[0].tobytes() == y1.tobytes()  # same region: same scale
    assert core.scaling_state("input")["amax_history"][0] == amax(3 * x)
    core.end_forward_region(True)
    state = core.scaling_state("input")
    assert state["scale"] == E4M3_MAX / amax(3 * x)  # fused update: the window's max, IEEE division
    assert list(state["amax_history"][-2:]) == [amax(x), amax(3 * x)]
    assert core.scaling_state("weight")["scale"] == E4M3_MAX / amax(w)
    # The per-call layer (Linear) updates after every forward: its second call differs, so the
    # region test above can tell the two apart.
    layer = nvfp4.Linear(64, 16, delayed())
    layer.weight[:] = w
    assert layer.forward(x).tobytes() == first.tobytes()
    assert layer.forward(x).tobytes() != first.tobytes()


def test_evaluation_amaxes_merge_into_the_next_update(data):
    # TE under torch.no_grad(): the quantizers still record amaxes, the region's exit skips the
    # update (grad disabled), so the next training update max-merges them.
    x, w = data["x"], data["w"]
    core = nvfp4.LinearCore(64, 16, delayed())
    y_eval = core.infer(5 * x, w)
    assert isinstance(y_eval, np.ndarray)  # nothing saved for a backward
    core.end_forward_region(False)
    state = core.scaling_state("input")
    assert state["scale"] == 1.0 and state["amax_history"][0] == amax(5 * x)
    assert core.forward(5 * x, w)[0].tobytes() == y_eval.tobytes()  # same Y as the training forward
    core.forward(x, w)
    core.end_forward_region(True)
    assert core.scaling_state("input")["scale"] == E4M3_MAX / amax(5 * x)
    # record_amaxes=False: the library's inference forward, which records nothing.
    fresh = nvfp4.LinearCore(64, 16, delayed())
    assert fresh.infer(5 * x, w, record_amaxes=False).tobytes() == y_eval.tobytes()
    assert fresh.scaling_state("input")["amax_history"][0] == 0.0


def test_backward_role_updates_once_per_backward(data):
    # TE: the backward role's scale updates at the end of the backward pass (HYBRID: E5M2 grads).
    x, w, dy = data["x"], data["w"], data["dy"]
    core = nvfp4.LinearCore(64, 16, delayed())
    dw = np.zeros_like(w)
    _, saved = core.forward(x, w)
    core.backward(saved, dy, dw)
    assert core.scaling_state("grad_output")["scale"] == 1.0
    assert core.scaling_state("grad_output")["amax_history"][0] == amax(dy)
    core.end_backward_region()
    assert core.scaling_state("grad_output")["scale"] == E5M2_MAX / amax(dy)


def test_scaling_state_dict_round_trip(data):
    x, w = data["x"], data["w"]
    core = nvfp4.LinearCore(64, 16, delayed())
    core.forward(x, w)
    core.end_forward_region(True)
    state = core.scaling_state_dict()
    assert sorted(state) == sorted(f"{r}.{k}" for r in ("input", "weight", "grad_output") for k in ("scale", "amax_history"))
    other = nvfp4.LinearCore(64, 16, delayed())
    other.load_scaling_state_dict(state)
    assert other.forward(x, w)[0].tobytes() == core.forward(x, w)[0].tobytes()
    bad = dict(state)
    bad["grad_output.amax_history"] = np.zeros(7, np.float32)  # another history length
    fresh = nvfp4.LinearCore(64, 16, delayed())
    with pytest.raises(nvfp4.Error) as info:
        fresh.load_scaling_state_dict(bad)
    assert info.value.code == "shape_mismatch"
    assert fresh.scaling_state("input")["scale"] == 1.0  # nothing changed
    assert nvfp4.LinearCore(64, 16, nvfp4.Float8CurrentScaling()).scaling_state_dict() == {}


def test_bad_input_is_refused_and_loses_nothing(data):
    x, w, dy = data["x"], data["w"], data["dy"]
    core = nvfp4.LinearCore(64, 16, nvfp4.NVFP4BlockScaling(), bias=True)
    b = data["b"]
    with pytest.raises(TypeError, match="float32"):
        core.forward(x.astype(np.float64), w, b)
    with pytest.raises(nvfp4.Error) as info:
        core.forward(x, np.ascontiguousarray(w.T), b)
    assert info.value.code == "shape_mismatch"
    with pytest.raises(ValueError, match="C-contiguous"):
        core.forward(x, np.asfortranarray(w), b)
    with pytest.raises(ValueError, match="bias"):
        core.forward(x, w)
    y, saved = core.forward(x, w, b)
    dw, db = np.zeros_like(w), np.zeros_like(b)
    readonly = np.zeros_like(w)
    readonly.setflags(write=False)
    with pytest.raises(ValueError, match="writable"):
        core.backward(saved, dy, readonly, db)
    with pytest.raises(ValueError, match="bias_grad"):
        core.backward(saved, dy, dw)
    with pytest.raises(nvfp4.Error) as info:
        core.backward(saved, dy[:4], dw, db)
    assert info.value.code == "shape_mismatch"
    with pytest.raises(TypeError):  # not a SavedForward
        core.backward(y, dy, dw, db)
    other = nvfp4.LinearCore(64, 16, nvfp4.NVFP4BlockScaling(), bias=True)
    with pytest.raises(nvfp4.Error, match="another layer") as info:
        other.backward(saved, dy, dw, db)
    assert info.value.code == "invalid_argument" and other.steps == 0
    assert core.steps == 0  # nothing ran
    dx = core.backward(saved, dy, dw, db)  # the forward survived every refused call
    assert dx.shape == (32, 64) and np.isfinite(dw).all()
    with pytest.raises(TypeError):
        core.set_recipe("NVFP4BlockScaling")
    assert y.shape == (32, 16)


def test_absurd_sizes_are_refused_before_allocating():
    for make in (nvfp4.LinearCore, nvfp4.Linear):
        with pytest.raises(nvfp4.Error) as info:
            make(2**40, 2**40)
        assert info.value.code == "invalid_argument"
    assert nvfp4.LinearCore(65536, 65536).in_features == 65536  # nothing allocated
    try:  # 2 x 16 GiB, zero pages the allocator does not touch until used
        layer = nvfp4.Linear(65536, 65536)
        assert layer.weight.shape == (65536, 65536)
        del layer
    except MemoryError:
        pass


def test_threads_get_the_single_thread_bits(data):
    # The module releases the GIL; a lock per layer serializes the calls (issue 34).
    x, w = data["x"], data["w"]
    core = nvfp4.LinearCore(64, 16, nvfp4.NVFP4BlockScaling())
    layer = nvfp4.Linear(64, 16, nvfp4.NVFP4BlockScaling())
    layer.weight[:] = w
    expected_core, expected_layer = core.infer(x, w).tobytes(), layer.infer(x).tobytes()
    mismatches = []

    def run():
        for _ in range(20):
            if core.infer(x, w).tobytes() != expected_core:
                mismatches.append("core")
            if layer.infer(x).tobytes() != expected_layer:
                mismatches.append("layer")
            core.forward(x, w)  # training forwards from every thread: serialized, no crash

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mismatches == []


@pytest.mark.parametrize("recipe", [None, nvfp4.Float8CurrentScaling(), nvfp4.MXFP8BlockScaling()],
                         ids=lambda r: nvfp4.recipe_name(r))
def test_one_linear_shared_by_8_threads_gives_each_its_single_thread_dx(data, recipe):
    # issue 39 item 4: nvfp4.Linear kept one last forward for the layer, so a thread's backward
    # differentiated whichever thread's forward came last ('no forward to differentiate' in 12 of
    # 240 pairs, silently wrong dX in others). Each thread's backward now takes its own forward.
    rng = np.random.default_rng(5)
    inputs = [(rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32))
              for _ in range(8)]
    layer = nvfp4.Linear(64, 16, recipe, bias=True)
    layer.weight[:] = data["w"]
    layer.bias[:] = data["b"]
    expected = []
    for x, dy in inputs:
        y = layer.forward(x)
        expected.append((y.tobytes(), layer.backward(dy).tobytes()))
    mismatches, errors = [], []
    start = threading.Barrier(8)

    def run(i):
        x, dy = inputs[i]
        start.wait()
        try:
            for _ in range(30):
                y = layer.forward(x)
                dx = layer.backward(dy)
                if (y.tobytes(), dx.tobytes()) != expected[i]:
                    mismatches.append(i)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and mismatches == []


def test_linear_backward_needs_a_forward_of_its_own_thread(data):
    layer = nvfp4.Linear(64, 16, nvfp4.Float8CurrentScaling())
    layer.weight[:] = data["w"]
    layer.forward(data["x"])
    caught = []
    t = threading.Thread(target=lambda: caught.append(pytest.raises(ValueError, layer.backward, data["dy"])))
    t.start()
    t.join()
    assert "no forward to differentiate" in str(caught[0].value)
    with pytest.raises(ValueError, match="expected 32x16"):  # a refused dY keeps the forward
        layer.backward(data["dy"][:, :8])
    dx = layer.backward(data["dy"])
    assert dx.shape == (32, 64)
    with pytest.raises(ValueError, match="no forward to differentiate"):  # a backward takes its forward
        layer.backward(data["dy"])


# ---- the saved forward (TE's ctx.save_for_backward): one per call -------------------------------

EVERY_RECIPE = [None, nvfp4.NVFP4BlockScaling(), nvfp4.Float8CurrentScaling(), delayed(), nvfp4.Float8BlockScaling(),
                nvfp4.MXFP8BlockScaling()]


def alone(recipe, data, x, dy, backward_number, dtype="bf16"):
    """Y, dX, dW, db of a fresh core running one call alone as its `backward_number`-th backward."""
    core = nvfp4.LinearCore(64, 16, recipe, bias=True, dtype=dtype, seed=3)
    core.steps = backward_number  # NVFP4's gradient seed is the core's backward count
    y, saved = core.forward(x, data["w"], data["b"])
    dw, db = np.zeros_like(data["w"]), np.zeros_like(data["b"])
    return [a.tobytes() for a in (y, core.backward(saved, dy, dw, db), dw, db)]


def backward_of(core, saved, dy, data):
    dw, db = np.zeros_like(data["w"]), np.zeros_like(data["b"])
    dx = core.backward(saved, dy, dw, db)
    return [a.tobytes() for a in (dx, dw, db)]


@pytest.mark.parametrize("recipe", EVERY_RECIPE, ids=lambda r: nvfp4.recipe_name(r))
@pytest.mark.parametrize("reverse", [False, True], ids=["in_order", "reversed"])
def test_two_forwards_then_backwards_give_fresh_cores_bits(data, recipe, reverse):
    # issue 39 item 2: a second call before the first call's backward; each backward gets its own
    # forward's gradients, in either order (scales update only at region ends here, as in TE).
    x2, dy2 = 3 * data["x"][::-1].copy(), 0.5 * data["dy"][::-1].copy()
    calls = [(data["x"], data["dy"]), (x2, dy2)]
    core = nvfp4.LinearCore(64, 16, recipe, bias=True, dtype="bf16", seed=3)
    forwards = [core.forward(x, data["w"], data["b"]) for x, _ in calls]
    order = [1, 0] if reverse else [0, 1]
    for number, i in enumerate(order):
        y, saved = forwards[i]
        got = [y.tobytes()] + backward_of(core, saved, calls[i][1], data)
        assert got == alone(recipe, data, *calls[i], number), f"call {i}"


@pytest.mark.parametrize("first", EVERY_RECIPE, ids=lambda r: nvfp4.recipe_name(r))
def test_recipe_switch_between_forward_and_backward(data, first):
    # The forward's recipe runs its backward (TE's ctx keeps the forward's recipe and quantized
    # operands); the previous workaround re-ran the forward under the core's current recipe.
    core = nvfp4.LinearCore(64, 16, first, bias=True, dtype="bf16", seed=3)
    y, saved = core.forward(data["x"], data["w"], data["b"])
    assert nvfp4.recipe_name(saved.recipe) == nvfp4.recipe_name(first)
    for second in EVERY_RECIPE:
        core.set_recipe(second)
        core.forward(2 * data["x"], data["w"], data["b"])  # a call under the other recipe in between
    got = [y.tobytes()] + backward_of(core, saved, data["dy"], data)
    assert got == alone(first, data, data["x"], data["dy"], 0)


def test_delayed_scaling_update_between_forward_and_backward(data):
    # The first call's backward differentiates X as that call quantized it (scale 1), although the
    # input scale updated at the region's end in between.
    x, w, b = data["x"], data["w"], data["b"]
    core = nvfp4.LinearCore(64, 16, delayed(), bias=True, seed=3)
    y, saved = core.forward(x, w, b)
    core.end_forward_region(True)
    assert core.scaling_state("input")["scale"] != 1.0
    core.forward(7 * x, w, b)
    got = [y.tobytes()] + backward_of(core, saved, data["dy"], data)
    assert got == alone(delayed(), data, x, data["dy"], 0, dtype="fp32")
    # The backward quantizes dY with the core's live grad_output state and records its amax there.
    assert core.scaling_state("grad_output")["amax_history"][0] == amax(data["dy"])


@pytest.mark.parametrize("recipe", EVERY_RECIPE, ids=lambda r: nvfp4.recipe_name(r))
def test_backward_twice_on_one_saved_forward(data, recipe):
    # torch's retain_graph: the same bits, except NVFP4's gradient seed, which is the core's
    # backward count (the second backward runs as the core's second).
    core = nvfp4.LinearCore(64, 16, recipe, bias=True, dtype="bf16", seed=3)
    y, saved = core.forward(data["x"], data["w"], data["b"])
    first = backward_of(core, saved, data["dy"], data)
    second = backward_of(core, saved, data["dy"], data)
    assert first == alone(recipe, data, data["x"], data["dy"], 0)[1:]
    assert second == alone(recipe, data, data["x"], data["dy"], 1)[1:]
    if not isinstance(recipe, nvfp4.NVFP4BlockScaling):
        assert second == first
    assert core.steps == 2


def test_saved_forward_describes_its_call(data):
    core = nvfp4.LinearCore(64, 16, nvfp4.Float8CurrentScaling(), dtype="bf16")
    _, saved = core.forward(data["x"], data["w"])
    core.set_recipe(None)
    assert saved.rows == 32 and saved.dtype == "bf16"
    assert isinstance(saved.recipe, nvfp4.Float8CurrentScaling)
    assert "Float8CurrentScaling" in repr(saved)
    with pytest.raises(TypeError):
        nvfp4.SavedForward()  # made by forward only


def test_saved_forward_used_from_another_thread(data):
    # A forward's saved state goes to another thread, whose backward runs while this thread keeps
    # calling the core (serialized by the core's lock): every backward gives its own call's bits.
    recipe = nvfp4.NVFP4BlockScaling()
    core = nvfp4.LinearCore(64, 16, recipe, bias=True, dtype="bf16", seed=3)
    inputs = [(np.float32(1 + i) * data["x"], np.float32(1 + i) * data["dy"]) for i in range(6)]
    saved = [core.forward(x, data["w"], data["b"]) for x, _ in inputs]
    results = {}

    def differentiate():
        for i in range(len(inputs)):
            results[i] = backward_of(core, saved[i][1], inputs[i][1], data)

    worker = threading.Thread(target=differentiate)
    worker.start()
    for _ in range(20):
        core.infer(data["x"], data["w"], data["b"])
    worker.join()
    assert core.steps == len(inputs)
    for i, (x, dy) in enumerate(inputs):
        assert [saved[i][0].tobytes()] + results[i] == alone(recipe, data, x, dy, i), f"call {i}"


# ---- bf16 tensors as their bits (no fp32 copy) -------------------------------------------------

def to_bf16_bits(a):
    """float32 values -> their bf16 bits (uint16), rounded to nearest even (NumPy, not the module)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("recipe", EVERY_RECIPE, ids=lambda r: nvfp4.recipe_name(r))
def test_bf16_bits_give_the_float32_calls_bits(data, recipe):
    # A bf16 core reads bf16 bits as they are and writes Y / dX as bits: the values of the float32
    # calls (which round X, W, b, dY to bf16 and write Y, dX rounded to bf16), with no fp32 copy.
    x, w, b, dy = (to_bf16_bits(data[k]) for k in ("x", "w", "b", "dy"))
    core = nvfp4.LinearCore(64, 16, recipe, bias=True, dtype="bf16", seed=3)
    y, saved = core.forward(x, w, b)
    assert y.dtype == np.uint16 and y.shape == (32, 16)
    dw, db = np.zeros((16, 64), np.float32), np.zeros(16, np.float32)
    dx = core.backward(saved, dy, dw, db)
    assert dx.dtype == np.uint16 and dx.shape == (32, 64)
    want = alone(recipe, {"w": from_bf16_bits(w), "b": from_bf16_bits(b)}, from_bf16_bits(x), from_bf16_bits(dy), 0)
    assert [from_bf16_bits(y).tobytes(), from_bf16_bits(dx).tobytes(), dw.tobytes(), db.tobytes()] == want
    # Mixed: float32 X with bf16 W (a bf16 model's parameters under fp32 activations) and back.
    core2 = nvfp4.LinearCore(64, 16, recipe, bias=True, dtype="bf16", seed=3)
    y2, saved2 = core2.forward(from_bf16_bits(x), w, from_bf16_bits(b))
    assert y2.dtype == np.float32 and y2.tobytes() == from_bf16_bits(y).tobytes()
    dx2 = core2.backward(saved2, from_bf16_bits(dy), dw, db)
    assert dx2.dtype == np.float32 and dx2.tobytes() == from_bf16_bits(dx).tobytes()
    assert core2.infer(x, w, b).tobytes() == y.tobytes()


@pytest.mark.parametrize("recipe", EVERY_RECIPE, ids=lambda r: nvfp4.recipe_name(r))
def test_bf16_core_writes_dw_as_bf16_bits(data, recipe):
    # weight_grad as uint16 (a bf16 core): dW rounded once to bf16 (nearest even, here in NumPy from
    # the float32 dW of the same call), nothing else changed; the core's fp32 scratch is reused
    # across calls of other dY, and a refused call leaves weight_grad as it was.
    x, w, b = (to_bf16_bits(data[k]) for k in ("x", "w", "b"))
    for step, scale in enumerate((1.0, 1e-3, 40.0)):
        dy = to_bf16_bits(data["dy"] * np.float32(scale))
        wanted, fp32_core = [], nvfp4.LinearCore(64, 16, recipe, bias=True, dtype="bf16", seed=3)
        bits_core = nvfp4.LinearCore(64, 16, recipe, bias=True, dtype="bf16", seed=3)
        fp32_core.steps = bits_core.steps = step
        dw32, db32 = np.zeros((16, 64), np.float32), np.zeros(16, np.float32)
        dx32 = fp32_core.backward(fp32_core.forward(x, w, b)[1], dy, dw32, db32)
        dw16, db16 = np.full((16, 64), 0xFFFF, np.uint16), np.zeros(16, np.float32)
        dx16 = bits_core.backward(bits_core.forward(x, w, b)[1], dy, dw16, db16)
        assert dx16.tobytes() == dx32.tobytes() and db16.tobytes() == db32.tobytes()
        assert dw16.dtype == np.uint16 and dw16.tobytes() == to_bf16_bits(dw32).tobytes()
    before = dw16.copy()
    _, saved = bits_core.forward(x, w, b)
    with pytest.raises(nvfp4.Error):
        bits_core.backward(saved, to_bf16_bits(data["dy"][:8]), dw16, db16)  # wrong dY shape
    assert dw16.tobytes() == before.tobytes()
    core = nvfp4.LinearCore(64, 16, recipe, bias=True, seed=3)
    _, saved = core.forward(data["x"], data["w"], data["b"])
    with pytest.raises(TypeError, match="dtype 'bf16'"):  # an fp32 core takes float32 dW only
        core.backward(saved, data["dy"], dw16, db16)
    assert dw16.tobytes() == before.tobytes()


def test_bf16_bits_are_refused_by_an_fp32_core_and_checked(data):
    core = nvfp4.LinearCore(64, 16, nvfp4.NVFP4BlockScaling(), bias=True)
    with pytest.raises(TypeError, match="dtype 'bf16'"):
        core.forward(to_bf16_bits(data["x"]), data["w"], data["b"])
    with pytest.raises(TypeError, match="dtype 'bf16'"):
        core.forward(data["x"], to_bf16_bits(data["w"]), data["b"])
    bf = nvfp4.LinearCore(64, 16, nvfp4.NVFP4BlockScaling(), bias=True, dtype="bf16")
    with pytest.raises(TypeError, match="float32"):
        bf.forward(data["x"].astype(np.int16), data["w"], data["b"])
    with pytest.raises(ValueError, match="C-contiguous"):
        bf.forward(to_bf16_bits(data["x"]), np.asfortranarray(to_bf16_bits(data["w"])), data["b"])
    nan_x = to_bf16_bits(data["x"])
    nan_x[3, 5] = 0x7FC0  # a bf16 NaN: refused, as in float32
    with pytest.raises(nvfp4.Error) as info:
        bf.forward(nan_x, data["w"], data["b"])
    assert info.value.code == "non_finite_input"
    # A strided bf16 X is read through a copy: the same bits.
    wide = np.zeros((32, 128), np.uint16)
    wide[:, ::2] = to_bf16_bits(data["x"])
    assert bf.infer(wide[:, ::2], data["w"], data["b"]).tobytes() == bf.infer(to_bf16_bits(data["x"]), data["w"], data["b"]).tobytes()
