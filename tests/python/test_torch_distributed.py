# nvfp4.torch across processes (issue 42), as TransformerEngine runs on several GPUs: delayed
# scaling's amax reduction (quantization.py reduce_and_update_fp8_tensors), tensor and sequence
# parallelism (module/linear.py, layernorm_linear.py, layernorm_mlp.py), te.distributed.checkpoint.
# Each launch spawns 2 or 4 ranks of distributed_worker.py over gloo on the loopback interface (a
# file rendezvous, a 20 s collective timeout, the launch killed after LAUNCH_TIMEOUT); the
# expected values are computed here, in one process without torch.distributed, from what the
# ranks saved: single-process layers fed the ranks' rows, or TE's composition of per-rank GEMMs.
import os
import pathlib
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt install python3-torch): nvfp4.torch untested")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("this PyTorch has no torch.distributed with gloo", allow_module_level=True)
import nvfp4.torch as te  # noqa: E402
from nvfp4.common import recipe as R  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import distributed_worker as W  # noqa: E402  (the ranks' scenarios, sizes and data)

WORKER = pathlib.Path(W.__file__)
LAUNCH_TIMEOUT = 240  # seconds for a whole launch (imports included: slow on a loaded 2-core machine)
MAIN = ["ddp", "ddp_default_group", "independent", "nan_amax", "tp", "tp_delayed_steps", "sp", "checkpoint",
        "layout_mismatch", "sp_rows_mismatch", "sp_delayed_without_reduction", "after_errors"]


class Launch:
    def __init__(self, results, codes, logs, seconds):
        self.results, self.codes, self.logs, self.seconds = results, codes, logs, seconds


def launch(directory, world, scenarios):
    """Runs `scenarios` on `world` ranks; returns each rank's saved results, exit code and log."""
    directory = pathlib.Path(directory)
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(WORKER.parent), env.get("PYTHONPATH", "")] if p)
    logs = [directory / f"rank{r}.log" for r in range(world)]
    start = time.monotonic()
    procs = []
    for r in range(world):
        with open(logs[r], "w") as log:
            procs.append(subprocess.Popen(
                [sys.executable, str(WORKER), "--rank", str(r), "--world", str(world), "--init",
                 f"file://{directory / 'rendezvous'}", "--out", str(directory), "--scenarios", ",".join(scenarios)],
                stdout=log, stderr=subprocess.STDOUT, env=env))
    try:
        for p in procs:
            p.wait(timeout=max(1.0, LAUNCH_TIMEOUT - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"the {world}-rank launch of {scenarios} hung past {LAUNCH_TIMEOUT} s:\n" +
                    "\n".join(log.read_text()[-3000:] for log in logs))
    seconds = time.monotonic() - start
    results = [torch.load(directory / f"rank{r}.pt") if (directory / f"rank{r}.pt").exists() else {} for r in range(world)]
    return Launch(results, [p.returncode for p in procs], [log.read_text() for log in logs], seconds)


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    run = launch(tmp_path_factory.mktemp("two_ranks"), 2, MAIN)
    assert run.codes == [0, 0], "\n".join(run.logs)
    return run


def result(run, rank, scenario):
    out = run.results[rank][scenario]
    if isinstance(out, dict) and "error" in out:
        pytest.fail(f"rank {rank}, {scenario}: {out['traceback']}")
    return out


def same(a, b):
    """Equal bit for bit (NaN included), through nested lists and dicts."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(u, v) for u, v in zip(a, b))
    if torch.is_tensor(a):
        bits = lambda t: t.contiguous().view(-1).view(torch.uint8) if t.numel() else t  # noqa: E731
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))
    return a == b


def rank_order_sum(parts):
    """What a rank-ordered all-reduce gives: each addition rounded once to the parts' dtype (NCCL's
    rounding; for two ranks every order gives this)."""
    total = parts[0]
    for p in parts[1:]:
        total = total + p if total.dtype == torch.float32 else (total.float() + p.float()).to(total.dtype)
    return total


def relative_error(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


# ---- delayed scaling's amax reduction under DDP ------------------------------------------------------------

def ddp_model():
    return torch.nn.Sequential(te.Linear(32, 64), torch.nn.GELU(), te.Linear(64, 32))


def same_model_state(a, b):
    """Two of the DDP model's state_dicts hold the same weights and delayed-scaling states (the
    _extra_state pickles are compared by what they load, not by their bytes)."""
    if a.keys() != b.keys() or not all(same(a[k], b[k]) for k in a if not k.endswith("_extra_state")):
        return False
    models = [ddp_model(), ddp_model()]
    for model, state in zip(models, (a, b)):
        model.load_state_dict(state)
    return all(same(models[0][i]._unit.extra_state(), models[1][i]._unit.extra_state()) for i in (0, 2))


def single_process_step(before, x, dy, recipe):
    """One step of the DDP scenario's model in one process, from a rank's state_dict (weights and
    delayed-scaling state): y, dx and the scaling states after it."""
    model = ddp_model()
    model.load_state_dict(before)
    x = x.clone().requires_grad_()
    with te.autocast(recipe=recipe):
        y = model(x)
    y.backward(dy)
    return y.detach(), x.grad, W.scaling_states(model[0]) + W.scaling_states(model[2])


@pytest.mark.parametrize("scenario", ["ddp", "ddp_default_group"])
def test_ddp_delayed_scaling_holds_one_state_on_every_rank_fed_the_max_of_the_amaxes(two, scenario):
    # Every step: both ranks start from the same weights and delayed-scaling state, and end with the
    # same state, which is that of one process fed both ranks' rows (its amaxes are the max of the
    # ranks'); y and dX on each rank's rows are that process's bit for bit. "ddp_default_group":
    # autocast without amax_reduction_group reduces over the default group, as TE's does.
    a, b = result(two, 0, scenario), result(two, 1, scenario)
    for step, (s0, s1) in enumerate(zip(a, b)):
        assert same_model_state(s0["before"], s1["before"]), step
        assert same(s0["states"], s1["states"]), step
        y, dx, states = single_process_step(s0["before"], torch.cat([s0["x"], s1["x"]]), torch.cat([s0["dy"], s1["dy"]]),
                                            R.DelayedScaling(amax_history_len=4))
        rows = s0["x"].shape[0]
        assert same(y[:rows], s0["y"]) and same(y[rows:], s1["y"]), step
        assert same(dx[:rows], s0["dx"]) and same(dx[rows:], s1["dx"]), step
        assert same(states, s0["states"]), step
    assert not same(a[0]["states"], a[1]["states"])  # the scales moved: the check above was not vacuous


def test_reduce_amax_false_keeps_each_rank_its_own_state(two):
    a, b = result(two, 0, "independent"), result(two, 1, "independent")
    assert not same(a[0]["states"], b[0]["states"])
    for steps in (a, b):
        for step, s in enumerate(steps):
            _, _, states = single_process_step(s["before"], s["x"], s["dy"], R.DelayedScaling(amax_history_len=4,
                                                                                               reduce_amax=False))
            assert same(states, s["states"]), step


def test_a_nan_amax_loses_to_a_number_on_every_rank(two):
    # NCCL's float max is fmaxf: rank 1's NaN amax gives way to rank 0's, on both ranks (gloo's own
    # max keeps or drops a NaN by its position).
    a, b = result(two, 0, "nan_amax"), result(two, 1, "nan_amax")
    assert same(a["states"], b["states"])
    history = a["states"][0]["input.amax_history"]
    assert history[-1] == a["amax0"] and not torch.isnan(history).any()


def test_ranks_that_ran_different_layers_fail_alike_and_the_group_survives(two):
    for rank in (0, 1):
        error = two.results[rank]["layout_mismatch"]["error"]
        assert "forward amax reduction" in error and "ranks disagree" in error
        assert "rank 0: 1 delayed-scaling GEMM layers" in error and "rank 1: 2 delayed-scaling GEMM layers" in error
        error = two.results[rank]["sp_rows_mismatch"]["error"]
        assert "all-gather: the ranks disagree" in error and "rank 0: float32 tensor of 2 dims, 8 rows" in error
        assert two.results[rank]["sp_delayed_without_reduction"]["error"] == (
            "ValueError: Amax reduction across tensor parallel group is necessary when using sequence parallelism with FP8.")
        assert result(two, rank, "after_errors")["sum"].item() == 3.0


# ---- tensor parallelism -------------------------------------------------------------------------------------

def test_tensor_parallel_arguments_are_checked_as_te_checks_them():
    # In one process, no torch.distributed: TE's constructor rules (module/linear.py,
    # layernorm_linear.py, layernorm_mlp.py, utils.divide).
    with pytest.raises(ValueError, match="parallel_mode diagonal not supported"):
        te.Linear(16, 8, parallel_mode="diagonal")
    with pytest.raises(ValueError, match="^9 is not divisible by 2$"):
        te.Linear(16, 9, parallel_mode="column", tp_size=2)
    with pytest.raises(NotImplementedError, match="Normalization does not support tensor-parallel distribution."):
        te.LayerNormLinear(16, 8, parallel_mode="row")
    with pytest.raises(ValueError, match="set_parallel_mode"):
        te.LayerNormMLP(16, 32, tp_size=2, sequence_parallel=True)
    layer = te.Linear(16, 8, parallel_mode="row", tp_size=2)  # no group yet: this rank's 8 input features
    assert (layer.in_features, layer.out_features, layer.tp_size, layer.weight.partition_dim) == (8, 8, 2, 1)
    mlp = te.LayerNormMLP(16, 32, set_parallel_mode=True, tp_size=2)
    assert mlp.size_per_partition == 16 and mlp.fc1_weight.shape == (16, 16) and mlp.fc2_weight.shape == (16, 16)
    with pytest.raises(RuntimeError, match="Tensor parallel group not initialized"):
        layer(torch.randn(4, 8))
    # One rank: the layer is te.Linear's, a row-parallel bias added after the (absent) all-reduce.
    torch.manual_seed(0)
    plain, column = te.Linear(16, 8), te.Linear(16, 8, parallel_mode="column", tp_size=1, sequence_parallel=True)
    column.load_state_dict(plain.state_dict())
    x = torch.randn(4, 16)
    assert same(plain(x), column(x)) and column.sequence_parallel is False
    gathered, handle = te.distributed.gather_along_first_dim(x, None)
    assert gathered is x and handle is None and te.distributed.get_distributed_world_size() == 1


def shard_layers(rank, world, name):
    """TE's composition for one rank: single-process layers on the rank's shards (fc2 without its
    bias, which the row-parallel layer adds after the all-reduce)."""
    make, dtype = W.RECIPES[name]
    w, share = W.full_weights(dtype), W.F // world
    fc1 = te.Linear(W.H, share, params_dtype=dtype)
    fc2 = te.Linear(share, W.H, bias=False, params_dtype=dtype)
    with torch.no_grad():
        fc1.weight.copy_(w["w1"][rank * share:(rank + 1) * share])
        fc1.bias.copy_(w["b1"][rank * share:(rank + 1) * share])
        fc2.weight.copy_(w["w2"][:, rank * share:(rank + 1) * share])
    return fc1, fc2


def te_composition(name, x, dy, world=2):
    """The per-rank GEMMs and the all-reduce of a column -> row parallel MLP, in one process."""
    make, dtype = W.RECIPES[name]
    b2 = W.full_weights(dtype)["b2"].clone().requires_grad_()
    leaves, layers, partial = [], [], []
    for rank in range(world):
        fc1, fc2 = shard_layers(rank, world, name)
        leaf = x.clone().requires_grad_()
        with te.autocast(enabled=make() is not None, recipe=make()):
            partial.append(fc2(torch.nn.functional.gelu(fc1(leaf))))
        leaves.append(leaf)
        layers.append((fc1, fc2))
    y = rank_order_sum(partial) + b2
    y.backward(dy)
    return y.detach(), rank_order_sum([leaf.grad for leaf in leaves]), layers, b2.grad


def single_process_mlp(name, steps):
    """The MLP in one process with the full weights, over (x, dy) steps: per step h, y, dx, grads, states."""
    make, dtype = W.RECIPES[name]
    recipe, w = make(), W.full_weights(dtype)
    fc1, fc2 = te.Linear(W.H, W.F, params_dtype=dtype), te.Linear(W.F, W.H, params_dtype=dtype)
    with torch.no_grad():
        fc1.weight.copy_(w["w1"]), fc1.bias.copy_(w["b1"]), fc2.weight.copy_(w["w2"]), fc2.bias.copy_(w["b2"])
    out = []
    for x, dy in steps:
        step = W.run_tp_step(fc1, fc2, x, dy, recipe)
        step["states"] = W.scaling_states(fc1) + W.scaling_states(fc2)
        out.append(step)
    return out


# Recipes whose weight and activation quantization does not depend on how the GEMM is split: the
# column-parallel layer's output and every weight gradient are the single-process layer's bits.
SPLIT_INDEPENDENT = ("none", "delayed", "block", "mxfp8")


@pytest.mark.parametrize("name", list(W.RECIPES))
def test_tensor_parallel_mlp_is_tes_composition_of_per_rank_gemms(two, name):
    x, dy = W.data(7, W.M, W.RECIPES[name][1])
    y, dx, layers, db2 = te_composition(name, x, dy)
    share = W.F // 2
    for rank in (0, 1):
        got = result(two, rank, "tp")[name]
        fc1, fc2 = layers[rank]
        assert same(got["y"], y) and same(got["dx"], dx)
        assert same(got["fc1.dw"], fc1.weight.grad) and same(got["fc1.db"], fc1.bias.grad)
        assert same(got["fc2.dw"], fc2.weight.grad) and same(got["fc2.db"], db2)
        assert got["h"].shape == (W.M, share)


def float64_mlp(x, dy, dtype):
    """y and dX of the MLP in float64, unquantized."""
    w = {k: v.double() for k, v in W.full_weights(dtype).items()}
    x = x.double().requires_grad_()
    y = torch.nn.functional.gelu(x @ w["w1"].T + w["b1"]) @ w["w2"].T + w["b2"]
    y.backward(dy.double())
    return y.detach(), x.grad


@pytest.mark.parametrize("name", list(W.RECIPES))
def test_tensor_parallel_mlp_against_the_single_process_mlp(two, name):
    # Within tolerance: against the unquantized float64 MLP, the tensor-parallel y and dX are as
    # accurate as the single-process MLP's (within 10%: the row-parallel partial sums, and per-shard
    # scales under current scaling and NVFP4, move the error, they do not grow it), so the two
    # differ by at most the sum of their errors.
    x, dy = W.data(7, W.M, W.RECIPES[name][1])
    (single,) = single_process_mlp(name, [(x, dy)])
    exact = dict(zip(("y", "dx"), float64_mlp(x, dy, W.RECIPES[name][1])))
    share = W.F // 2
    for rank in (0, 1):
        got = result(two, rank, "tp")[name]
        cols = slice(rank * share, (rank + 1) * share)
        for key in ("y", "dx"):
            ours, theirs = relative_error(got[key], exact[key]), relative_error(single[key], exact[key])
            assert ours <= 1.1 * theirs + 1e-6, (key, ours, theirs)
            assert relative_error(got[key], single[key]) <= ours + theirs + 1e-6, key
        if name in SPLIT_INDEPENDENT:
            assert same(got["h"], single["h"][:, cols])
            assert same(got["fc1.dw"], single["fc1.dw"][cols]) and same(got["fc1.db"], single["fc1.db"][cols])
            assert same(got["fc2.dw"], single["fc2.dw"][:, cols].contiguous())


def test_tensor_parallel_delayed_scaling_keeps_the_single_process_scales(two):
    # Three steps under DelayedScaling, the amaxes reduced over the tensor-parallel ranks: each
    # rank's scales and histories are the single-process MLP's, and so are the column-parallel
    # output and the weight gradients on the rank's shard.
    steps = []
    for step in range(W.STEPS):
        x, dy = W.data(20 + step, W.M, torch.float32)
        steps.append((x * (1 + step), dy))
    single = single_process_mlp("delayed", steps)
    share = W.F // 2
    for rank in (0, 1):
        for step, (got, ref) in enumerate(zip(result(two, rank, "tp_delayed_steps"), single)):
            cols = slice(rank * share, (rank + 1) * share)
            assert same(got["states"], ref["states"]), (rank, step)
            assert same(got["h"], ref["h"][:, cols]), (rank, step)
            assert same(got["fc1.dw"], ref["fc1.dw"][cols]) and same(got["fc2.dw"], ref["fc2.dw"][:, cols].contiguous())
    assert not same(single[0]["states"], single[-1]["states"])


# ---- sequence parallelism --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(W.RECIPES))
@pytest.mark.parametrize("layers", ["pair", "mlp"])
def test_sequence_parallel_gives_each_rank_the_tensor_parallel_rows(two, name, layers):
    # te.LayerNormLinear (column) -> te.Linear (row), and te.LayerNormMLP(set_parallel_mode=True):
    # with sequence_parallel each rank holds its rows of the input; y and dX are the tensor-parallel
    # run's on those rows and the weight gradients its own, bit for bit (the gathered input is the
    # whole input, quantized as TE quantizes it with the group's amax). The norm's parameters and a
    # row-parallel bias get partial gradients over the rank's rows, which Megatron all-reduces.
    tp = [result(two, r, "sp")[f"{name}.{layers}.tp"] for r in (0, 1)]
    sp = [result(two, r, "sp")[f"{name}.{layers}.sp"] for r in (0, 1)]
    assert same(tp[0], tp[1])
    for rank in (0, 1):
        rows = slice(rank * W.M, (rank + 1) * W.M)
        assert same(sp[rank]["y"], tp[0]["y"][rows]) and same(sp[rank]["dx"], tp[0]["dx"][rows])
    # TE marks them (reset_parameters): the norm's parameters and the row-parallel bias
    partial = {"pair": ["0.layer_norm_bias", "0.layer_norm_weight", "1.bias"],
               "mlp": ["0.fc2_bias", "0.layer_norm_bias", "0.layer_norm_weight"]}[layers]
    assert sp[0]["sequence_parallel"] == partial and tp[0]["sequence_parallel"] == []
    for param, grad in tp[0]["grads"].items():
        if param in partial:  # the ranks' partial sums add up to the whole, to the dtype's rounding
            p0, p1 = sp[0]["grads"][param].double(), sp[1]["grads"][param].double()
            eps = 2.0 ** -7 if grad.dtype == torch.bfloat16 else 1e-5
            assert ((p0 + p1 - grad.double()).abs() <= eps * (p0.abs() + p1.abs() + grad.double().abs()) + 1e-6).all(), param
        else:
            assert same(sp[0]["grads"][param], grad) and same(sp[1]["grads"][param], grad), param


# ---- te.distributed.checkpoint ---------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["distributed", "sequence_parallel"])
def test_checkpoint_recomputes_the_same_bits_and_updates_once(two, variant):
    # A tensor-parallel LayerNormMLP under DelayedScaling (amaxes reduced), three steps, wrapped in
    # te.distributed.checkpoint or not: the same outputs, gradients and scaling states at every step,
    # on both ranks ("distributed": a replicated input, distribute_saved_activations=True over the
    # group; "sequence_parallel": each rank its rows). A recompute with updated scales, or a second
    # update, shows from the second step on.
    for rank in (0, 1):
        runs = result(two, rank, "checkpoint")[variant]
        for step, (plain, wrapped) in enumerate(zip(runs["plain"], runs["checkpoint"])):
            assert same(plain, wrapped), (rank, step)
    states = [result(two, r, "checkpoint")[variant]["plain"] for r in (0, 1)]
    assert same(states[0][-1]["states"], states[1][-1]["states"])
    assert not same(states[0][0]["states"], states[0][-1]["states"])


# ---- a rank that raises -------------------------------------------------------------------------------------

@pytest.mark.parametrize("scenario, raised, peer", [
    # rank 1's column-parallel layer refuses its input (TE's "GEMM not possible"); rank 0 waits in the
    # row-parallel layer's all-reduce, which fails once rank 1 has exited
    ("bad_shape", "in_features", "the tensor-parallel all-reduce failed: a rank of the group did not take part"),
    # rank 1's loss is NaN and its loop raises after the forward (whose amax reduction both ranks ran);
    # rank 0's backward (DDP's gradient all-reduce, the backward amax reduction) fails
    ("nan_loss", "FloatingPointError: rank 1: the loss is nan", "Connection closed by peer"),
])
def test_a_rank_that_raises_makes_every_rank_fail_without_hanging(tmp_path, scenario, raised, peer):
    run = launch(tmp_path, 2, [scenario + "!"])
    assert run.codes[1] != 0 and raised in run.logs[1], run.logs[1]
    assert run.codes[0] != 0, run.logs[0]
    assert peer in run.logs[0] or "did not take part" in run.logs[0], run.logs[0]


# ---- four ranks: a tensor-parallel x data-parallel mesh -----------------------------------------------------

def test_a_two_by_two_mesh_reduces_over_every_rank_and_splits_over_its_groups(tmp_path):
    # Tensor-parallel pairs {0, 1}, {2, 3} (their own process groups), DDP over the pairs {0, 2},
    # {1, 3}, amaxes reduced over all four: every rank holds the single-process MLP's scales when that
    # MLP is fed both data-parallel batches, and each rank's column-parallel output is that MLP's on
    # the rank's rows and columns, bit for bit.
    run = launch(tmp_path, 4, ["mesh"])
    assert run.codes == [0] * 4, "\n".join(run.logs)
    ranks = [result(run, r, "mesh") for r in range(4)]
    share = W.F // 2
    steps = [(torch.cat([ranks[0][t]["x"], ranks[2][t]["x"]]), torch.cat([ranks[0][t]["dy"], ranks[2][t]["dy"]]))
             for t in range(2)]
    single = single_process_mlp("delayed", steps)
    for r in range(4):
        dp, tp = r // 2, r % 2
        assert same(ranks[r][0]["x"], ranks[2 * dp][0]["x"])  # a tensor-parallel pair shares its batch
        for t in range(2):
            assert same(ranks[r][t]["states"], single[t]["states"]), (r, t)
            rows, cols = slice(dp * W.M, (dp + 1) * W.M), slice(tp * share, (tp + 1) * share)
            assert same(ranks[r][t]["h"], single[t]["h"][rows, cols]), (r, t)
