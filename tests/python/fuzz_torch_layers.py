#!/usr/bin/env python3
"""Property fuzzing of nvfp4.torch (issue 39): seeded random cases, run until a time budget is spent.

Layer cases (te.Linear, te.LayerNormLinear, te.LayerNormMLP): random sizes, parameter and input
dtypes, bias, recipes, and a random interleaving of forwards, backwards (in any order, some with
retain_graph, repeated, or under create_graph), in-place changes of a parameter or of a pending
call's input, and optimizer steps. The reference keeps every forward's tensors: a copy of the
module taken just before each call replays that call in isolation, with the gradient-side state
(NVFP4's stochastic-rounding step count, delayed scaling's grad_output scale and history) taken from
the live module just before the live backward, since TE reads that state when the backward runs.
Each backward must give its reference's bits, or raise torch's own error (a saved tensor changed in
place, a second backward without retain_graph); a gradient under create_graph must have a grad_fn.
A forward that TransformerEngine refuses (predicted here from TE's rules, not asked of the module:
an input dtype other than the parameters' outside torch autocast, the FP8 shape rule, the MXFP8 /
NVFP4 quantizers' dims, NVFP4's RHT on anything but bf16) must raise TE's exception type and
message and change nothing (parameters, scaling states, step counts).

Optimizer cases (extras.optim.AdamW / Muon): random parameter shapes (empty ones included),
dtypes, state dtypes (changed mid-run at times) and gradients (NaN, Inf, 1e22 at times); a twin
optimizer is rebuilt from torch.save(state_dict()) at random steps and must stay bit-identical to
the uninterrupted one; a step that raises (FP8 state and a non-finite moment, a bad group value, a
Muon vector) must change nothing.

usage: PYTHONPATH=build/<dir>/python python3 tests/python/fuzz_torch_layers.py [--seconds S] [--seed N] [--cases N] [-v]
Exits 0 when every case holds; 1 with the failing case's seed, its operations and the mismatch
(rerun that one case with --seed N --cases 1). CI runs it from tests/fuzz/run_fuzz_smoke.sh.
"""
import argparse
import copy
import io
import random
import sys
import time

import torch

import nvfp4.torch as te
from nvfp4.common import recipe as R
from nvfp4.torch import extras

STATE_DTYPES = ("float32", "bfloat16", "float8_e4m3", "float8_e5m2")
STATS = {"forwards": 0, "refused as TE refuses": 0, "backwards checked": 0, "torch errors as expected": 0,
         "optimizer steps checked": 0,
         "optimizer steps refused as expected": 0, "twin reloads": 0}
IN_PLACE_ERROR = "modified by an inplace operation"
SECOND_BACKWARD_ERROR = "backward through the graph a second time"


class Mismatch(AssertionError):
    pass


def check(condition, message):
    if not condition:
        raise Mismatch(message)


def bits(t):
    return None if t is None else (t.dtype, tuple(t.shape), t.detach().contiguous().reshape(-1).view(torch.uint8).tolist())


def te_refusal(module, x, recipe, rht):
    """(exception type, message) of TE's refusal of `module(x)` under `recipe` with no torch
    autocast, or None: TE's rules in TE's order, written out here (module/base.py
    set_activation_dtype; utils.py assert_dim_for_fp8_exec; csrc/quantizer.cpp; the harness's
    modules all take a 2-D input and keep one parameter dtype)."""
    for name, p in module.named_parameters():
        if p.dtype != x.dtype:
            return TypeError, ("Data types for parameters must match when outside of autocasted region. "
                               f"Found input dtype: {x.dtype} and {name!r} dtype: {p.dtype}")
    if recipe is None:
        return None
    rows = x.shape[0]
    if hasattr(module, "fc1_weight"):  # LayerNormMLP: fc1 on the input's rows, fc2 on the activation's
        weights = [tuple(module.fc1_weight.shape), tuple(module.fc2_weight.shape)]
        gemms = [((rows, weights[0][1]), weights[0]), ((rows, weights[1][1]), weights[1])]
    else:
        weights = [tuple(module.weight.shape)]
        gemms = [((rows, weights[0][1]), weights[0])]
    for shape in [tuple(x.shape)] + weights:
        if shape[0] % 8 or shape[1] % 16:
            return ValueError, ("FP8 execution requires the product of all dimensions except the last to be divisible by 8 "
                                "and the last dimension to be divisible by 16, but got tensor with "
                                f"dims={list(shape)} (product of leading dims = {shape[0]}, last dim = {shape[1]})")
    for inp, weight in gemms:
        for shape, is_input in ((inp, True), (weight, False)):
            text = f"(got shape=({shape[0]},{shape[1]}))"
            if isinstance(recipe, R.MXFP8BlockScaling) and (shape[0] % 32 or shape[1] % 32):
                return RuntimeError, f"MXFP8 requires tensor dims that are divisible by 32 {text}"
            if isinstance(recipe, R.NVFP4BlockScaling):
                if shape[0] % 16:
                    return RuntimeError, f"First dim for NVFP4 must be divisible by 16 {text}"
                if shape[1] % 16:
                    return RuntimeError, f"NVFP4 requires tensor dims that are divisible by 16 {text}"
                if is_input and rht and x.dtype != torch.bfloat16:
                    return RuntimeError, f"RHT is only supported for bfloat16 input, got dtype enum value {4 if x.dtype == torch.float32 else 5}"
    return None


def random_recipe(rng):
    kind = rng.choice(["none", "none", "delayed", "current", "block", "mxfp8", "nvfp4", "nvfp4"])
    if kind == "none":
        return None
    if kind == "delayed":
        return R.DelayedScaling(amax_history_len=rng.choice([1, 2, 16]), margin=rng.choice([0, 1]))
    if kind == "current":
        return R.Float8CurrentScaling()
    if kind == "block":
        return R.Float8BlockScaling()
    if kind == "mxfp8":
        return R.MXFP8BlockScaling()
    return R.NVFP4BlockScaling(disable_stochastic_rounding=rng.random() < 0.3, disable_rht=rng.random() < 0.3)


# ---- layer cases --------------------------------------------------------------------------------------

def make_module(rng):
    kind = rng.choice(["Linear", "LayerNormLinear", "LayerNormMLP"])
    dtype = rng.choice([torch.float32, torch.bfloat16])
    bias = rng.random() < 0.7
    a, b = rng.choice([32, 64, 96]), rng.choice([32, 64, 128])
    if kind == "Linear":
        module = te.Linear(a, b, bias=bias, params_dtype=dtype)
    elif kind == "LayerNormLinear":
        module = te.LayerNormLinear(a, b, bias=bias, params_dtype=dtype, normalization=rng.choice(["LayerNorm", "RMSNorm"]))
    else:
        module = te.LayerNormMLP(a, b, bias=bias, params_dtype=dtype, activation=rng.choice(["gelu", "swiglu", "relu"]))
    return module, a, f"{kind}({a}, {b}, bias={bias}, params_dtype={dtype})"


def unit_list(module):
    """The module's emulated GEMM layers (nvfp4.torch's LinearUnit objects), in a fixed order."""
    if hasattr(module, "_te_units"):
        return list(module._te_units())
    return [getattr(module, name) for name in ("_unit", "_fc1", "_fc2") if hasattr(module, name)]


def unit_states(module):
    """Each GEMM layer's {"scaling": delayed-scaling state, "steps": backward count}."""
    return [unit.extra_state() for unit in unit_list(module)]


def grad_side(live, ref, frozen):
    """The reference's unit states with the gradient-side entries the live backward will read, per
    unit: the live backward count, and delayed scaling's grad_output state: the live one, or, once
    the live unit left DelayedScaling after this call's forward, the one it had then (`frozen`: the
    saved forward's states stay as they were; TE's rule drops them from the layer)."""
    out = []
    for i, (live_unit, ref_unit) in enumerate(zip(live, ref)):
        unit = {"scaling": dict(ref_unit["scaling"]), "steps": live_unit["steps"]}
        for key, value in frozen.get(i, live_unit["scaling"]).items():
            if key.startswith("grad_output.") and key in unit["scaling"]:
                unit["scaling"][key] = value.clone()
        out.append(unit)
    return out


class Call:
    """One live forward and what replays it."""

    def __init__(self, module, ref, x, recipe, dy):
        self.module, self.ref, self.x, self.recipe, self.dy = module, ref, x, recipe, dy
        self.x_ref = x.detach().clone().requires_grad_(True)
        self.y = self.run(module, x)
        self.y_ref = None
        self.frozen = {}          # unit index -> its state when the unit left DelayedScaling
        self.must_raise = False   # a tensor it saved was changed in place since
        self.done = False         # a backward without retain_graph ran

    def run(self, module, x):
        with te.autocast(enabled=self.recipe is not None, recipe=self.recipe):
            return module(x)

    def reference(self, live_module, create_graph):
        """The replayed call's (y, grads) with the live module's gradient-side state now (under
        create_graph as the live backward is: torch's own backward formulas differ under it)."""
        if self.y_ref is None:
            self.y_ref = self.run(self.ref, self.x_ref)
        for unit, state in zip(unit_list(self.ref), grad_side(unit_states(live_module), unit_states(self.ref), self.frozen)):
            unit.load_extra_state(state)
        return self.y_ref, torch.autograd.grad(self.y_ref, [self.x_ref, *self.ref.parameters()], self.dy, retain_graph=True,
                                               create_graph=create_graph)


def layer_case(rng, log):
    module, features, name = make_module(rng)
    log.append(name)
    optimizer = extras.optim.AdamW(module.parameters(), lr=1e-3, state_dtype=rng.choice(STATE_DTYPES))
    pending = []
    for _ in range(rng.randint(3, 10)):
        op = rng.random()
        if op < 0.45 or not pending:
            recipe = random_recipe(rng)
            param_dtype = next(module.parameters()).dtype
            # mostly inputs TE accepts (so the quantized paths run), at times one it refuses
            legal = rng.random() < 0.8
            x_dtype = param_dtype if legal or rng.random() < 0.5 else rng.choice([torch.float32, torch.bfloat16])
            if legal and isinstance(recipe, R.NVFP4BlockScaling) and x_dtype != torch.bfloat16:
                recipe = R.NVFP4BlockScaling(disable_stochastic_rounding=recipe.disable_stochastic_rounding, disable_rht=True)
            if recipe is None:
                rows = rng.choice([1, 7, 16, 32, 48])
            elif legal:
                rows = rng.choice([32, 64] if isinstance(recipe, R.MXFP8BlockScaling) else [16, 32, 48])
            else:
                rows = rng.choice([1, 7, 16, 24, 32, 48])
            x = torch.randn(rows, features, dtype=x_dtype).mul_(rng.choice([1.0, 1e-3, 30.0]))
            x.requires_grad_(True)
            log.append(f"forward #{len(pending)} recipe={recipe!r} x={x_dtype} {tuple(x.shape)}")
            before = unit_states(module)
            refusal = te_refusal(module, x, recipe, isinstance(recipe, R.NVFP4BlockScaling) and not recipe.disable_rht)
            if refusal is not None:
                params_before = [bits(p) for p in module.parameters()]
                try:
                    Call(module, None, x, recipe, None)
                except refusal[0] as e:
                    check(str(e) == refusal[1], f"forward refused with {type(e).__name__}({e}), TE's is {refusal[1]!r}")
                else:
                    raise Mismatch(f"forward accepted what TE refuses: {refusal[0].__name__}({refusal[1]})")
                check([bits(p) for p in module.parameters()] == params_before, "a refused forward changed a parameter")
                after = unit_states(module)
                check(all(a["steps"] == b["steps"] and a["scaling"].keys() == b["scaling"].keys()
                          and all(torch.equal(a["scaling"][k], b["scaling"][k]) for k in a["scaling"])
                          for a, b in zip(before, after)), "a refused forward changed a scaling state or step count")
                log.append("  refused as TE refuses it")
                STATS["refused as TE refuses"] += 1
                continue
            ref = copy.deepcopy(module)
            call = Call(module, ref, x, recipe, None)
            call.dy = torch.randn(call.y.shape, dtype=call.y.dtype)
            if not isinstance(recipe, R.DelayedScaling):  # the layer leaves DelayedScaling (if it ran it)
                for i, state in enumerate(before):
                    if "grad_output.scale" in state["scaling"]:
                        for earlier in pending:
                            earlier.frozen.setdefault(i, {k: v.clone() for k, v in state["scaling"].items()})
            pending.append(call)
            STATS["forwards"] += 1
        elif op < 0.8:
            i = rng.randrange(len(pending))
            call = pending[i]
            retain = rng.random() < 0.3
            create = rng.random() < 0.15
            log.append(f"backward #{i} retain_graph={retain} create_graph={create} must_raise={call.must_raise} done={call.done}")
            # the replay first: it reads the live gradient-side state as the live backward will find it
            expected = None if call.done else call.reference(module, create)
            try:
                got = torch.autograd.grad(call.y, [call.x, *module.parameters()], call.dy, retain_graph=retain or create,
                                          create_graph=create, allow_unused=True)
            except RuntimeError as e:
                text = str(e)
                if call.done and (SECOND_BACKWARD_ERROR in text or IN_PLACE_ERROR in text):
                    STATS["torch errors as expected"] += 1
                    continue
                if call.must_raise and IN_PLACE_ERROR in text:
                    STATS["torch errors as expected"] += 1
                    call.done = True  # torch stopped part-way: the graph may be partly freed now
                    continue
                raise Mismatch(f"backward #{i} raised: {text}") from e
            check(not call.done, f"backward #{i}: a second backward without retain_graph was accepted")
            # (a must_raise call that did not raise: torch did not see the change, e.g. a bf16 input
            # that the norm converted before saving; its gradients must then be the forward's own)
            call.must_raise = False
            y_ref, grads_ref = expected
            check(bits(call.y) == bits(y_ref), f"forward #{i}: y differs from its replay")
            for k, (g, e) in enumerate(zip(got, grads_ref)):
                check(bits(g) == bits(e), f"backward #{i}: gradient {k} differs from its replay "
                                          f"(max |diff| {(g.float() - e.float()).abs().max().item() if g is not None and e is not None else 'None'})")
            STATS["backwards checked"] += 1
            if create:
                check(got[0] is None or got[0].grad_fn is not None, f"backward #{i}: dx under create_graph has no grad_fn")
            if not (retain or create):
                call.done = True
        elif op < 0.9:
            # an in-place change of a parameter: every pending call saved the parameters
            with torch.no_grad():
                p = rng.choice(list(module.parameters()))
                if rng.random() < 0.5:
                    p.mul_(1.0 + 2 ** -6)
                    log.append("in-place change of a parameter")
                else:
                    for q in module.parameters():
                        q.grad = torch.randn(q.shape, dtype=q.dtype) * 1e-2
                    optimizer.step()
                    log.append("optimizer step")
            for call in pending:
                call.must_raise = True
        else:
            i = rng.randrange(len(pending))
            with torch.no_grad():
                pending[i].x.add_(1.0)
            pending[i].must_raise = True
            log.append(f"in-place change of the input of #{i}")


# ---- optimizer cases ------------------------------------------------------------------------------

def snapshot(params, opt):
    return [bits(p) for p in params], [{k: bits(v) if torch.is_tensor(v) else v for k, v in opt.state[p].items()}
                                       for p in params if p in opt.state]


def through_torch_save(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer)


def optimizer_case(rng, log):
    kind = rng.choice(["AdamW", "Muon"])
    shapes = [rng.choice([(rng.randint(1, 40), rng.randint(1, 300)), (0, 5), (5, 0), (rng.randint(1, 9), 3, 4)])
              for _ in range(rng.randint(1, 4))]
    if kind == "AdamW":
        shapes += [(rng.randint(1, 200),)]
    dtype = rng.choice([torch.float32, torch.bfloat16])
    state_dtype = rng.choice(STATE_DTYPES)
    log.append(f"{kind} shapes={shapes} params={dtype} state={state_dtype}")
    cls = extras.optim.AdamW if kind == "AdamW" else extras.optim.Muon
    params = [torch.nn.Parameter(torch.randn(s).to(dtype)) for s in shapes]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    a, b = cls(params, lr=1e-2, state_dtype=state_dtype), cls(twins, lr=1e-2, state_dtype=state_dtype)
    poisoned = False
    for step in range(rng.randint(2, 8)):
        grads = [torch.randn(s) * rng.choice([1.0, 1e-4, 1e4]) for s in shapes]
        bad = rng.random() < 0.2 and any(g.numel() for g in grads)
        if bad:
            g = rng.choice([g for g in grads if g.numel()])
            g.view(-1)[rng.randrange(g.numel())] = rng.choice([float("nan"), float("inf"), 1e22, 3e38])
        if rng.random() < 0.15:
            new = rng.choice(STATE_DTYPES)
            a.param_groups[0]["state_dtype"] = b.param_groups[0]["state_dtype"] = new
            log.append(f"step {step}: state_dtype -> {new}")
        broken_group = rng.random() < 0.1
        for p, t, g in zip(params, twins, grads):
            p.grad, t.grad = g.to(dtype), g.to(dtype)
        if broken_group:
            a.param_groups[0]["lr"] = -1.0
        before = snapshot(params, a)
        log.append(f"step {step}: bad gradient={bad} bad group={broken_group}")
        try:
            a.step()
            refused = None
        except (ValueError, TypeError) as e:
            refused = e
        if refused is not None:
            check(snapshot(params, a) == before, f"step {step}: a refused step ({refused}) changed something")
            fp8 = a.param_groups[0]["state_dtype"] in ("float8_e4m3", "float8_e5m2")
            check(broken_group or ((bad or poisoned) and fp8), f"step {step}: refused without cause: {refused}")
            if broken_group:
                a.param_groups[0]["lr"] = 1e-2
            STATS["optimizer steps refused as expected"] += 1
            continue
        check(not broken_group, f"step {step}: lr=-1 was accepted")
        poisoned = poisoned or bad  # wide state keeps a NaN / Inf moment, as torch.optim.AdamW does
        b.step()
        check([bits(p) for p in params] == [bits(t) for t in twins], f"step {step}: the reloaded twin's parameters differ")
        STATS["optimizer steps checked"] += 1
        if rng.random() < 0.5:
            source = rng.choice([("the uninterrupted", a), ("its own", b)])
            saved = through_torch_save(source[1].state_dict())
            b = cls(twins, lr=5.0, state_dtype=rng.choice(STATE_DTYPES))  # the groups come from the saved state
            b.load_state_dict(saved)
            log.append(f"step {step}: twin rebuilt from torch.save of {source[0]} optimizer's state_dict()")
            STATS["twin reloads"] += 1
        check(snapshot(params, a)[1] == snapshot(twins, b)[1], f"step {step}: the twin's state differs")


# ---- driver -----------------------------------------------------------------------------------------

def run_case(seed, only=None):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    log = []
    case = layer_case if rng.random() < 0.7 else optimizer_case
    if only:
        case = {"layers": layer_case, "optim": optimizer_case}[only]
    try:
        case(rng, log)
    except Mismatch as e:
        return log, str(e)
    except Exception as e:  # noqa: BLE001 - any other error is a finding too
        return log, f"{type(e).__name__}: {e}"
    return log, None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=45.0, help="time budget (default 45)")
    parser.add_argument("--seed", type=int, default=1, help="first case's seed (cases use seed, seed+1, ...)")
    parser.add_argument("--cases", type=int, default=0, help="stop after this many cases (0: until the time is spent)")
    parser.add_argument("--only", choices=["layers", "optim"], help="run one kind of case only")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case's operations")
    args = parser.parse_args(argv)
    start, seed, count = time.monotonic(), args.seed, 0
    while (args.cases == 0 or count < args.cases) and (args.cases or time.monotonic() - start < args.seconds):
        log, failure = run_case(seed, args.only)
        if args.verbose or failure:
            print(f"case seed={seed}:\n  " + "\n  ".join(log))
        if failure:
            print(f"FAILED (seed {seed}): {failure}\nreplay: {sys.argv[0]} --seed {seed} --cases 1 -v")
            return 1
        seed, count = seed + 1, count + 1
    print(f"fuzz_torch_layers: {count} cases (seeds {args.seed}..{seed - 1}) held in {time.monotonic() - start:.1f} s: "
          + ", ".join(f"{v} {k}" for k, v in STATS.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
