# nvfp4.LinearCore: one emulated TE Linear over parameters the caller owns (python/bind_nn.cpp).
# Bits against the C++ layer (tests/python/write_reference.cpp), delayed scaling's regions against
# TE's rules (scales computed here in numpy from the amaxes), bad input, sizes and threads.
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
    assert core.forward(arrays["x"], w).tobytes() == arrays["linear_y"].tobytes()
    assert core.backward(arrays["linear_dy"], w, dw).tobytes() == arrays["linear_dx"].tobytes()
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
    assert core.forward(data["x"], data["w"], data["b"]).tobytes() == layer.forward(data["x"]).tobytes()
    assert core.backward(data["dy"], data["w"], dw, db).tobytes() == layer.backward(data["dy"]).tobytes()
    assert dw.tobytes() == layer.weight_grad.tobytes() and db.tobytes() == layer.bias_grad.tobytes()


def test_parameters_are_read_in_place_and_gradients_written_in_place(data):
    x, w, b = data["x"], data["w"].copy(), data["b"]
    core = nvfp4.LinearCore(64, 16, bias=True)  # no quantization, fp32
    assert np.allclose(core.forward(x, w, b), x @ w.T + b, rtol=1e-5, atol=1e-5)
    w *= 2  # the caller's array, changed in place: the next call reads it
    assert np.allclose(core.forward(x, w, b), x @ w.T + b, rtol=1e-5, atol=1e-5)
    dy = np.ones((32, 16), np.float32)
    dw, db = np.full_like(w, np.nan), np.full(16, np.nan, np.float32)
    dx = core.backward(dy, w, dw, db)
    assert np.allclose(dx, dy @ w, rtol=1e-5, atol=1e-5)
    assert np.allclose(dw, dy.T @ x, rtol=1e-5, atol=1e-4)
    assert np.array_equal(db, np.full(16, 32, np.float32))  # the sum of dY's rows, exact


def test_one_scale_per_forward_region(data):
    # TE (pytorch/quantization.py, the outermost autocast's exit -> reduce_and_update_fp8_tensors):
    # the forward roles' scales update once per region, so two calls in one region use one scale,
    # and their amaxes are max-merged into one history entry.
    x, w = data["x"], data["w"]
    core = nvfp4.LinearCore(64, 16, delayed())
    first = core.forward(x, w)
    core.end_forward_region(True)  # scale 1 -> 448 / amax(x)
    y1, y2 = core.forward(x, w), core.forward(3 * x, w)
    assert core.forward(x, w).tobytes() == y1.tobytes()  # same region: same scale
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
    y_eval = core.forward(5 * x, w, training=False)
    core.end_forward_region(False)
    state = core.scaling_state("input")
    assert state["scale"] == 1.0 and state["amax_history"][0] == amax(5 * x)
    assert core.forward(5 * x, w).tobytes() == y_eval.tobytes()  # same Y as the training forward
    core.forward(x, w)
    core.end_forward_region(True)
    assert core.scaling_state("input")["scale"] == E4M3_MAX / amax(5 * x)
    with pytest.raises(nvfp4.Error):  # an evaluation forward keeps nothing for backward
        fresh = nvfp4.LinearCore(64, 16, delayed())
        fresh.forward(x, w, training=False)
        fresh.backward(data["dy"], w, np.zeros_like(w))


def test_backward_role_updates_once_per_backward(data):
    # TE: the backward role's scale updates at the end of the backward pass (HYBRID: E5M2 grads).
    x, w, dy = data["x"], data["w"], data["dy"]
    core = nvfp4.LinearCore(64, 16, delayed())
    dw = np.zeros_like(w)
    core.forward(x, w)
    core.backward(dy, w, dw)
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
    assert other.forward(x, w).tobytes() == core.forward(x, w).tobytes()
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
    y = core.forward(x, w, b)
    dw, db = np.zeros_like(w), np.zeros_like(b)
    readonly = np.zeros_like(w)
    readonly.setflags(write=False)
    with pytest.raises(ValueError, match="writable"):
        core.backward(dy, w, readonly, db)
    with pytest.raises(ValueError, match="bias_grad"):
        core.backward(dy, w, dw)
    with pytest.raises(nvfp4.Error) as info:
        core.backward(dy[:4], w, dw, db)
    assert info.value.code == "shape_mismatch"
    dx = core.backward(dy, w, dw, db)  # the forward survived every refused call
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
    expected_core, expected_layer = core.forward(x, w, training=False).tobytes(), layer.infer(x).tobytes()
    mismatches = []

    def run():
        for _ in range(20):
            if core.forward(x, w, training=False).tobytes() != expected_core:
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
