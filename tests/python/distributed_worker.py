"""One rank of tests/python/test_torch_distributed.py: joins a gloo group (loopback, file rendezvous,
collective timeout), runs the named scenarios in order and saves what each produced (tensors, or
the error it raised) to <out>/rank<r>.pt after each one. A scenario name ending in '!' is run
bare: its exception ends the process (exit code 1), as a failing rank of a training job would.

    distributed_worker.py --rank R --world N --init file:///path --out DIR --scenarios a,b,c!
"""
import argparse
import datetime
import os
import traceback

import torch
import torch.distributed as dist

import nvfp4.torch as te
from nvfp4.common import recipe as R

H, F, M = 64, 256, 32  # hidden, ffn (two shards of 128: FP8 block scaling's weight blocks), rows
STEPS = 3

RECIPES = {  # (recipe, activation dtype)
    "none": (lambda: None, torch.float32),
    "delayed": (lambda: R.DelayedScaling(amax_history_len=4), torch.float32),
    "current": (R.Float8CurrentScaling, torch.bfloat16),
    "block": (R.Float8BlockScaling, torch.float32),
    "mxfp8": (R.MXFP8BlockScaling, torch.bfloat16),
    "nvfp4": (R.NVFP4BlockScaling, torch.bfloat16),
}


def full_weights(dtype):
    """The single-process MLP's parameters (the same on every rank)."""
    g = torch.Generator().manual_seed(1)
    return {"w1": (torch.randn(F, H, generator=g) * 0.05).to(dtype), "b1": (torch.randn(F, generator=g) * 0.1).to(dtype),
            "w2": (torch.randn(H, F, generator=g) * 0.05).to(dtype), "b2": (torch.randn(H, generator=g) * 0.1).to(dtype)}


def data(seed, rows, dtype):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, H, generator=g).to(dtype), torch.randn(rows, H, generator=g).to(dtype)


def scaling_states(module):
    """{unit index: scaling_state_dict} of a module's GEMM layers (delayed scaling only)."""
    units = module._te_units() if hasattr(module, "_te_units") else [module._fc1, module._fc2]
    return [{k: torch.from_numpy(v.copy()) for k, v in u.core.scaling_state_dict().items()} for u in units]


def tp_mlp(rank, world, dtype, group, sequence_parallel=False):
    """te.Linear column-parallel -> GELU -> te.Linear row-parallel, this rank's shards of full_weights."""
    w, share = full_weights(dtype), F // world
    fc1 = te.Linear(H, F, parallel_mode="column", tp_group=group, sequence_parallel=sequence_parallel, params_dtype=dtype)
    fc2 = te.Linear(F, H, parallel_mode="row", tp_group=group, sequence_parallel=sequence_parallel, params_dtype=dtype)
    with torch.no_grad():
        fc1.weight.copy_(w["w1"][rank * share:(rank + 1) * share])
        fc1.bias.copy_(w["b1"][rank * share:(rank + 1) * share])
        fc2.weight.copy_(w["w2"][:, rank * share:(rank + 1) * share])
        fc2.bias.copy_(w["b2"])
    return fc1, fc2


def run_tp_step(fc1, fc2, x, dy, recipe):
    x = x.clone().requires_grad_()
    with te.autocast(enabled=recipe is not None, recipe=recipe):
        h = fc1(x)
        y = fc2(torch.nn.functional.gelu(h))
    y.backward(dy)
    out = {"h": h.detach(), "y": y.detach(), "dx": x.grad}
    for name, layer in (("fc1", fc1), ("fc2", fc2)):
        out[f"{name}.dw"], out[f"{name}.db"] = layer.weight.grad.clone(), layer.bias.grad.clone()
        layer.zero_grad(set_to_none=True)
    return out


# ---- scenarios -------------------------------------------------------------------------------------------

def s_ddp(rank, world, group_arg="world", reduce_amax=True, steps=STEPS):
    """DDP over [te.Linear, GELU, te.Linear] under DelayedScaling: per step the state_dict before it
    (weights and delayed-scaling state), the rank's x, dy, y, dx, and the scaling states after."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(te.Linear(32, 64), torch.nn.GELU(), te.Linear(64, 32))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    recipe = R.DelayedScaling(amax_history_len=4, reduce_amax=reduce_amax)
    out = []
    for step in range(steps):
        g = torch.Generator().manual_seed(100 + 10 * step + rank)
        x = (torch.randn(16, 32, generator=g) * (1.0 + rank + step)).requires_grad_()
        dy = torch.randn(16, 32, generator=g) * (2.0 - rank)
        before = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in model.state_dict().items()}
        if group_arg == "world":
            region = te.autocast(recipe=recipe, amax_reduction_group=dist.group.WORLD)
        else:  # no group: TE reduces over the default group
            region = te.autocast(enabled=True, recipe=recipe)
        with region:
            y = ddp(x)
        y.backward(dy)
        out.append({"before": before, "x": x.detach(), "dy": dy, "y": y.detach(), "dx": x.grad.clone(),
                    "states": scaling_states(model[0]) + scaling_states(model[2])})
        opt.step()
        opt.zero_grad(set_to_none=True)
    return out


def s_ddp_default_group(rank, world):
    return s_ddp(rank, world, group_arg="default", steps=2)


def s_independent(rank, world):
    return s_ddp(rank, world, reduce_amax=False, steps=2)


def s_nan_amax(rank, world):
    """Rank 1's input holds a NaN: the reduced amax is rank 0's number (NCCL's fmaxf), on both ranks."""
    torch.manual_seed(0)
    layer = te.Linear(32, 32)
    x = torch.randn(16, 32) * (3.0 if rank == 0 else 1.0)
    if rank == 1:
        x[3, 5] = float("nan")
    with te.autocast(recipe=R.DelayedScaling(amax_history_len=2)):
        layer(x.requires_grad_())
    return {"states": scaling_states(layer), "amax0": (x.abs().max() if rank == 0 else torch.tensor(float("nan")))}


def s_tp(rank, world):
    """One step of the tensor-parallel MLP under each recipe; the rank's shards and data come from
    seeds every rank shares (TP replicates the input)."""
    out = {}
    for name, (make, dtype) in RECIPES.items():
        fc1, fc2 = tp_mlp(rank, world, dtype, dist.group.WORLD)
        x, dy = data(7, M, dtype)
        out[name] = run_tp_step(fc1, fc2, x, dy, make())
    return out


def s_tp_delayed_steps(rank, world):
    """Three steps of the tensor-parallel MLP under DelayedScaling (amaxes reduced over the default
    group, which is the tensor-parallel group here), the weights fixed: per step the outputs and the
    scaling states after it."""
    make, dtype = RECIPES["delayed"]
    recipe = make()
    fc1, fc2 = tp_mlp(rank, world, dtype, dist.group.WORLD)
    steps = []
    for step in range(STEPS):
        x, dy = data(20 + step, M, dtype)
        x = x * (1 + step)
        result = run_tp_step(fc1, fc2, x, dy, recipe)
        result["states"] = scaling_states(fc1) + scaling_states(fc2)
        steps.append(result)
    return steps


def s_sp(rank, world):
    """Sequence parallel against tensor parallel on the same rows, under each recipe: te.LayerNormLinear
    (column) -> GELU -> te.Linear (row), and te.LayerNormMLP(set_parallel_mode=True)."""
    out = {}
    for name, (make, dtype) in RECIPES.items():
        for sp in (False, True):
            torch.manual_seed(3)
            ln1 = te.LayerNormLinear(H, F, parallel_mode="column", tp_group=dist.group.WORLD, sequence_parallel=sp,
                                     params_dtype=dtype)
            fc2 = te.Linear(F, H, parallel_mode="row", tp_group=dist.group.WORLD, sequence_parallel=sp, params_dtype=dtype)
            torch.manual_seed(4)
            mlp = te.LayerNormMLP(H, F, set_parallel_mode=True, tp_group=dist.group.WORLD, sequence_parallel=sp,
                                  params_dtype=dtype)
            x, dy = data(9, M * world, dtype)
            if sp:
                x, dy = x.chunk(world)[rank], dy.chunk(world)[rank]
            for label, forward, params in (("pair", lambda t: fc2(torch.nn.functional.gelu(ln1(t))), [ln1, fc2]),
                                           ("mlp", mlp, [mlp])):
                leaf = x.clone().requires_grad_()
                with te.autocast(enabled=make() is not None, recipe=make()):
                    y = forward(leaf)
                y.backward(dy)
                named = [(f"{i}.{n}", p) for i, m in enumerate(params) for n, p in m.named_parameters()]
                out[f"{name}.{label}.{'sp' if sp else 'tp'}"] = {
                    "y": y.detach(), "dx": leaf.grad, "grads": {n: p.grad.clone() for n, p in named},
                    "sequence_parallel": sorted(n for n, p in named if getattr(p, "sequence_parallel", False))}
    return out


def s_checkpoint(rank, world):
    """te.distributed.checkpoint around a tensor-parallel LayerNormMLP under DelayedScaling, three
    steps, against the same steps without it: with a replicated input and distribute_saved_activations
    over the group (Megatron's use: each rank keeps a share of the input), and with sequence
    parallelism (each rank its own rows)."""
    out = {}
    for variant in ("distributed", "sequence_parallel"):
        sp = variant == "sequence_parallel"
        runs = {}
        for wrapped in (False, True):
            torch.manual_seed(5)
            mlp = te.LayerNormMLP(H, F, set_parallel_mode=True, tp_group=dist.group.WORLD, sequence_parallel=sp)
            recipe = R.DelayedScaling(amax_history_len=4)
            steps = []
            for step in range(STEPS):
                x, dy = data(30 + step, M * world, torch.float32)
                x = x * (1 + step)
                if sp:
                    x, dy = x.chunk(world)[rank], dy.chunk(world)[rank]
                x = x.clone().requires_grad_()
                with te.autocast(recipe=recipe):
                    if wrapped:
                        y = te.distributed.checkpoint(mlp, x, distribute_saved_activations=not sp, tp_group=dist.group.WORLD)
                    else:
                        y = mlp(x)
                y.backward(dy)
                steps.append({"y": y.detach(), "dx": x.grad, "grads": {n: p.grad.clone() for n, p in mlp.named_parameters()},
                              "states": scaling_states(mlp)})
                mlp.zero_grad(set_to_none=True)
            runs["checkpoint" if wrapped else "plain"] = steps
        out[variant] = runs
    return out


def s_layout_mismatch(rank, world):
    """Rank 1 runs one more delayed-scaling layer in the region: the reduction refuses on every rank."""
    torch.manual_seed(0)
    a, b = te.Linear(32, 32), te.Linear(32, 32)
    x = torch.randn(16, 32)
    with te.autocast(recipe=R.DelayedScaling()):
        y = a(x)
        if rank == 1:
            y = b(y)
    return {"unreachable": True}


def s_sp_rows_mismatch(rank, world):
    """Ranks pass different row counts to a sequence-parallel layer: the gather refuses on every rank."""
    layer = te.Linear(H, F, parallel_mode="column", tp_group=dist.group.WORLD, sequence_parallel=True)
    layer(torch.randn(8 * (rank + 1), H))
    return {"unreachable": True}


def s_sp_delayed_without_reduction(rank, world):
    """TE's assertion: sequence parallelism under DelayedScaling needs reduce_amax (raised before any collective)."""
    layer = te.Linear(H, F, parallel_mode="column", tp_group=dist.group.WORLD, sequence_parallel=True)
    with te.autocast(recipe=R.DelayedScaling(reduce_amax=False)):
        layer(torch.randn(M, H))
    return {"unreachable": True}


def s_after_errors(rank, world):
    """The group still works after the refusals above (they failed alike on every rank)."""
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    return {"sum": t}


def s_bad_shape(rank, world):
    """Rank 1 feeds the column-parallel layer a wrong last dimension (it raises); rank 0 goes on to
    the row-parallel layer's all-reduce, which fails once rank 1 is gone."""
    fc1, fc2 = tp_mlp(rank, world, torch.float32, dist.group.WORLD)
    x = torch.randn(M, H if rank == 0 else H + 16)
    with te.autocast(recipe=R.Float8CurrentScaling()):
        fc2(torch.nn.functional.gelu(fc1(x)))


def s_nan_loss(rank, world):
    """DDP under DelayedScaling; rank 1's loss is NaN and its training loop raises, as a loop that
    checks its loss does; rank 0 goes on to the backward, whose collectives fail once rank 1 is gone."""
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(te.Linear(32, 32), torch.nn.GELU(), te.Linear(32, 32)))
    x = torch.randn(16, 32)
    if rank == 1:
        x[0, 0] = float("nan")
    with te.autocast(recipe=R.DelayedScaling(), amax_reduction_group=dist.group.WORLD):
        loss = model(x).square().mean()
    if not torch.isfinite(loss):
        raise FloatingPointError(f"rank {rank}: the loss is {loss.item()}")
    loss.backward()


def s_mesh(rank, world):
    """A 2 x 2 mesh: tensor-parallel pairs {0, 1} and {2, 3}, data-parallel pairs {0, 2} and {1, 3}
    (DDP over them), amaxes reduced over all four. Two steps of the TP MLP under DelayedScaling."""
    tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dp_groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    tp_group, dp_group = tp_groups[rank // 2], dp_groups[rank % 2]
    tp_rank, dp_rank = rank % 2, rank // 2
    make, dtype = RECIPES["delayed"]
    recipe = make()
    fc1, fc2 = tp_mlp(tp_rank, 2, dtype, tp_group)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(fc1, torch.nn.GELU(), fc2), process_group=dp_group)
    steps = []
    for step in range(2):
        x, dy = data(40 + 10 * step + dp_rank, M, dtype)
        x = (x * (1 + dp_rank)).requires_grad_()
        seen = {}
        hook = fc1.register_forward_hook(lambda module, inputs, output: seen.update(h=output.detach()))
        with te.autocast(recipe=recipe, amax_reduction_group=dist.group.WORLD):
            y = model(x)  # through DDP, so the data-parallel pair reduces the gradients
        hook.remove()
        y.backward(dy)
        steps.append({"x": x.detach(), "dy": dy, "h": seen["h"], "y": y.detach(),
                      "states": scaling_states(fc1) + scaling_states(fc2), "fc1.dw": fc1.weight.grad.clone()})
        model.zero_grad(set_to_none=True)
    return steps


SCENARIOS = {name[2:]: fn for name, fn in globals().items() if name.startswith("s_")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--init", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--scenarios", required=True)
    p.add_argument("--timeout", type=float, default=20.0)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=args.init, rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    results = {}
    path = os.path.join(args.out, f"rank{args.rank}.pt")
    for name in args.scenarios.split(","):
        if name.endswith("!"):
            SCENARIOS[name[:-1]](args.rank, args.world)
            continue
        try:
            results[name] = SCENARIOS[name](args.rank, args.world)
        except Exception as e:  # the test decides whether this scenario was meant to raise
            results[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        torch.save(results, path)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
