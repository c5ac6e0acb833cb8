#!/usr/bin/env python3
"""One Linear training step (forward + backward) in PyTorch's own layers beside nvfp4.torch's
emulated TransformerEngine layers, in one run, at several thread counts.

Rows, each timed in the same process for a given thread count:
  torch_bf16_matmul / torch_fp32_matmul   X @ W^T alone (oneDNN / MKL through torch)
  torch_bf16_step / torch_fp32_step       torch.nn.Linear, bf16 or fp32 parameters and input
  te_<recipe>_<mode>_step                 nvfp4.torch.Linear(mode=...) under autocast(recipe),
                                          bf16 parameters and input (TE's usual setting); recipe
                                          "none": outside any region (the bf16 layer's own GEMMs)
A step is y = layer(x); y.backward(dy) with fresh gradients; its GEMMs are fprop, dgrad and wgrad
of an M x N x K Linear (3 * 2MNK FLOP). Each thread count runs in its own process (OpenMP's
thread count is read at start: OMP_NUM_THREADS), so the library and torch run with the same count.
Times are the median of --repeat steps after --warmup; every row of a thread count is printed with
its ratio to torch's bf16 step of that count.

    python3 benchmarks/torch_step_bench.py --shape 4096 4096 4096 --threads 1,all
    PYTHONPATH=build/release/python python3 benchmarks/torch_step_bench.py --threads 1,16 --json out.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

RECIPES = ["none", "nvfp4", "fp8_current", "mxfp8", "fp8_block", "delayed"]


def recipe_module():
    """The recipe classes, wherever this version of the package keeps them (TE's module path
    nvfp4.common.recipe, or nvfp4.torch.recipe)."""
    try:
        from nvfp4.common import recipe
        return recipe
    except ImportError:
        from nvfp4.torch import recipe
        return recipe


def make_recipe(name):
    if name == "none":
        return None
    r = recipe_module()
    return {"nvfp4": lambda: r.NVFP4BlockScaling(), "fp8_current": lambda: r.Float8CurrentScaling(),
            "mxfp8": lambda: r.MXFP8BlockScaling(), "fp8_block": lambda: r.Float8BlockScaling(),
            "delayed": lambda: r.DelayedScaling()}[name]()


def timed(step, warmup, repeat, clock=time.perf_counter):
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeat):
        start = clock()
        step()
        times.append(clock() - start)
    return statistics.median(times)


def worker(args):
    import torch
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m, n, k = args.shape
    rows = []

    def record(name, seconds, flop):
        rows.append({"name": name, "threads": threads, "ms": seconds * 1e3, "tflops": flop / seconds / 1e12})
        print(f"  {name:34s} {threads:3d} threads {seconds * 1e3:10.1f} ms", file=sys.stderr, flush=True)

    step_flop = 3 * 2.0 * m * n * k
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    for dtype, label in ((torch.bfloat16, "bf16"), (torch.float32, "fp32")):
        a = torch.randn(m, k, dtype=dtype)
        w = torch.randn(n, k, dtype=dtype)
        if "matmul" in args.parts:
            record(f"torch_{label}_matmul", timed(lambda: torch.matmul(a, w.t()), args.warmup, args.repeat, clock), 2.0 * m * n * k)
        if "torch" in args.parts:
            layer = torch.nn.Linear(k, n, dtype=dtype)
            x = torch.randn(m, k, dtype=dtype, requires_grad=True)
            dy = torch.randn(m, n, dtype=dtype) * 0.01

            def torch_step():
                x.grad = None
                layer.zero_grad(set_to_none=True)
                layer(x).backward(dy)

            record(f"torch_{label}_step", timed(torch_step, args.warmup, args.repeat, clock), step_flop)

    if "te" in args.parts:
        import nvfp4.torch as te
        x = torch.randn(m, k, dtype=torch.bfloat16, requires_grad=True)
        dy = (torch.randn(m, n) * 0.01).to(torch.bfloat16)
        for name in args.recipes:
            for mode in args.modes:
                if mode == "exact" and name not in args.exact_recipes:
                    continue
                layer = te.Linear(k, n, params_dtype=torch.bfloat16, mode=mode)
                recipe = make_recipe(name)

                def te_step():
                    x.grad = None
                    layer.zero_grad(set_to_none=True)
                    with te.autocast(enabled=recipe is not None, recipe=recipe):
                        y = layer(x)
                    y.backward(dy)

                record(f"te_{name}_{mode}_step", timed(te_step, args.warmup, args.repeat, clock), step_flop)
    print(json.dumps(rows), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", type=int, nargs=3, default=[4096, 4096, 4096], metavar=("M", "N", "K"))
    parser.add_argument("--threads", default="1,all", help="comma-separated counts; 'all' = os.cpu_count()")
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--modes", default="relaxed,exact")
    parser.add_argument("--exact-recipes", default="nvfp4", help="recipes also timed with exact GEMMs (slow at 1 thread)")
    parser.add_argument("--parts", default="matmul,torch,te", help="any of matmul, torch, te")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time, or the process's CPU time (steadier on a loaded machine; all threads' time summed)")
    parser.add_argument("--json", help="also write every row to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for key in ("recipes", "modes", "exact_recipes", "parts"):
        setattr(args, key, [v for v in getattr(args, key).split(",") if v])
    if args.worker:
        worker(args)
        return

    counts = []
    for item in args.threads.split(","):
        count = os.cpu_count() if item == "all" else int(item)
        if count not in counts:
            counts.append(count)
    rows = []
    for count in counts:
        env = dict(os.environ, OMP_NUM_THREADS=str(count))
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--shape", *map(str, args.shape),
                   "--recipes", ",".join(args.recipes), "--modes", ",".join(args.modes), "--exact-recipes",
                   ",".join(args.exact_recipes), "--parts", ",".join(args.parts), "--warmup", str(args.warmup),
                   "--repeat", str(args.repeat), "--clock", args.clock]
        result = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, check=True)
        rows += json.loads(result.stdout.strip().splitlines()[-1])

    m, n, k = args.shape
    print(f"shape M x N x K = {m} x {n} x {k}; median of {args.repeat} after {args.warmup} warm-up; {args.clock} time")
    print(f"{'row':34s} {'threads':>7s} {'ms':>10s} {'TFLOP/s':>8s} {'vs torch bf16 step':>19s}")
    for count in counts:
        base = next((r["ms"] for r in rows if r["threads"] == count and r["name"] == "torch_bf16_step"), None)
        for r in (r for r in rows if r["threads"] == count):
            ratio = f"{r['ms'] / base:.2f}x" if base and r["name"].endswith("_step") else ""
            print(f"{r['name']:34s} {count:7d} {r['ms']:10.1f} {r['tflops']:8.3f} {ratio:>19s}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": args.shape, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
