#!/usr/bin/env python3
"""TE's unfused delayed-scaling update (pytorch/quantization.py _default_sf_compute, decorated with
TE's jit_fuser, i.e. torch.compile unless NVTE_TORCH_COMPILE=0) evaluated on the GPU both ways:
eager torch and torch.compile (Inductor + Triton), over many amaxes, and the FP8 casts of
non-finite values (torch's cast and the satfinite PTX cvt TE's CUDA casts compile to).

TE's formula (quantization.py at d0067d0, restated): sf = (fp8_max / amax) / 2**margin; the old
scale where amax is not > 0 or not finite; FLT_MAX where sf is Inf. fp8_max is a Python int there
(Format.E4M3.max_fwd = 448, E5M2 57344), margin the recipe's margin (int, or a float).

Needs torch with CUDA and Triton, numpy; no TransformerEngine.
usage: run_te_compiled_update.py OUT_DIR            (on the GPU machine)
       run_te_compiled_update.py --pack NPZ DATA_DIR (here: the subset the C++ test reads, .npy)
       run_te_compiled_update.py --pack-all NPZ DIR  (all amaxes, for NVFP4_TE_UNFUSED_UPDATE_DIR)
Writes OUT_DIR/te_compiled_update.npz (the golden set), sweep.npz (a whole binade, for study),
code.txt (Inductor's kernels and their PTX), log.txt.
"""
import glob
import os
import sys
import traceback

import numpy as np

if __name__ == "__main__" and sys.argv[1:2] not in (["--pack"], ["--pack-all"]):
    import torch
    import torch._dynamo

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join("/tmp", "te_cu_triton_cache"))
DEV = "cuda"
F32_MAX = float(np.finfo(np.float32).max)
OLD_SCALE = 0.75  # a scale no rule computes here, so "kept the old scale" is visible
log_lines, code_lines = [], []


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    log_lines.append(s)


def sf_compute(amax, scale, fp8_max, margin, _fp32_max=F32_MAX):
    sf = (fp8_max / amax) / (2**margin)
    sf = torch.where(amax > 0.0, sf, scale)
    sf = torch.where(torch.isfinite(amax), sf, scale)
    sf = torch.where(torch.isinf(sf), torch.full_like(sf, _fp32_max), sf)
    scale.copy_(sf)
    return scale


def bits(t):
    return t.detach().contiguous().view(torch.int32).cpu().numpy().view(np.uint32)


def amax_set():
    rng = np.random.default_rng(20261127)
    parts = []
    parts.append(np.exp2(rng.uniform(-40, 40, 40000)).astype(np.float32))  # random, wide
    parts.append((1 + rng.random(20000)).astype(np.float32))  # random in one binade
    parts.append(rng.integers(0x00800000, 0x7F7FFFFF, 20000, dtype=np.uint32).view(np.float32))  # any normal
    parts.append(rng.integers(1, 0x00800000, 2000, dtype=np.uint32).view(np.float32))  # subnormal
    p2 = np.exp2(np.arange(-149, 128, dtype=np.float64)).astype(np.float32)
    parts.append(p2)
    parts.append(np.nextafter(p2, np.float32(np.inf)))
    parts.append(np.nextafter(p2, np.float32(0)))
    k = np.arange(1, 257, dtype=np.float64)
    for m in (448.0, 57344.0):
        mult = np.concatenate([m * k, m / k, m * np.exp2(np.arange(-60, 61))]).astype(np.float32)
        parts.append(mult)
        parts.append(np.nextafter(mult, np.float32(np.inf)))
        parts.append(np.nextafter(mult, np.float32(0)))
    # around where fp8_max / amax overflows (amax ~ 448 / FLT_MAX ~ 2^-119) and FLT_MAX
    for edge in (448.0 / F32_MAX, 57344.0 / F32_MAX, F32_MAX):
        e = np.float32(edge)
        b = int(np.array([e], dtype=np.float32).view(np.uint32)[0])
        parts.append(np.arange(b - 64, b + 65, dtype=np.int64).clip(1, 0x7F7FFFFF).astype(np.uint32).view(np.float32))
    parts.append(np.array([0.0, -0.0, np.inf, np.nan, -1.0, np.float32(1e-45), F32_MAX], dtype=np.float32))
    return np.concatenate(parts).astype(np.float32)


def run_config(fn, amax_np, fp8_max, margin):
    amax = torch.from_numpy(amax_np).to(DEV)
    scale = torch.full_like(amax, OLD_SCALE)
    out = fn(amax, scale, fp8_max, margin)
    torch.cuda.synchronize()
    return bits(out)


def main():
    log("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name())
    try:
        import triton

        log("triton", triton.__version__)
    except Exception as e:  # noqa: BLE001
        log("triton missing", e)
    log("dynamo specialize_float", getattr(torch._dynamo.config, "specialize_float", "?"),
        "automatic_dynamic_shapes", torch._dynamo.config.automatic_dynamic_shapes)
    from torch._inductor.utils import run_and_get_code

    amaxes = amax_set()
    log("amaxes", amaxes.size)
    result = {"amax": amaxes.view(np.uint32), "old_scale": np.float32(OLD_SCALE)}
    margins = [0, 1, 0.5, 2, -1]
    for margin in margins:
        mtag = str(margin).replace(".", "p").replace("-", "m")
        # eager (NVTE_TORCH_COMPILE=0)
        for fp8_max in (448, 57344):
            result[f"eager_{fp8_max}_m{mtag}"] = run_config(sf_compute, amaxes, fp8_max, margin)
        # TE's pattern: one lazily compiled function, first called by the forward update (448),
        # then by the backward one (57344), then forward again (recompiles make ints dynamic).
        torch._dynamo.reset()
        compiled = torch.compile(sf_compute)
        for call, fp8_max in enumerate((448, 57344, 448)):
            amax = torch.from_numpy(amaxes).to(DEV)
            scale = torch.full_like(amax, OLD_SCALE)
            out, codes = run_and_get_code(compiled, amax, scale, fp8_max, margin)
            torch.cuda.synchronize()
            result[f"compiled_{fp8_max}_m{mtag}_call{call}"] = bits(out)
            for i, c in enumerate(codes):
                code_lines.append(f"==== margin {margin} call {call} fp8_max {fp8_max} code {i}\n{c}")
        # a fresh compile for 57344 alone (a process whose first update is a backward one)
        torch._dynamo.reset()
        compiled = torch.compile(sf_compute)
        result[f"compiled_57344_m{mtag}_fresh"] = run_config(compiled, amaxes, 57344, margin)
        for k in [k for k in result if k.startswith("compiled_") and f"_m{mtag}_" in k]:
            fp8 = int(k.split("_")[1])
            e = result[f"eager_{fp8}_m{mtag}"]
            diff = (e != result[k]).sum()
            d = np.abs(e.astype(np.int64) - result[k].astype(np.int64))
            log(f"{k}: differs from eager in {diff} of {e.size}, max {d.max()} ulp")

    # Whole binade [1, 2) through the first compiled kernel (margin 0, 448) and eager, and Triton's
    # plain fp32 1 / x, kept as differences from eager to study the compiled rounding.
    try:
        x = torch.arange(0x3F800000, 0x40000000, dtype=torch.int64, device=DEV).to(torch.int32).view(torch.float32)
        torch._dynamo.reset()
        compiled = torch.compile(sf_compute)
        c = compiled(x.clone(), torch.full_like(x, OLD_SCALE), 448, 0)
        e = sf_compute(x.clone(), torch.full_like(x, OLD_SCALE), 448, 0)
        rn = torch.reciprocal(x)
        import triton
        import triton.language as tl

        @triton.jit
        def rcp_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = i < n
            v = tl.load(x_ptr + i, mask=m)
            tl.store(y_ptr + i, 1 / v, mask=m)

        y = torch.empty_like(x)
        rcp_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        torch.cuda.synchronize()
        ci = c.view(torch.int32).to(torch.int64)
        ei = e.view(torch.int32).to(torch.int64)
        ri = rn.view(torch.int32).to(torch.int64)
        yi = y.view(torch.int32).to(torch.int64)
        np.savez_compressed(os.path.join(out_dir, "sweep.npz"),
                            compiled_minus_eager=(ci - ei).clamp(-127, 127).to(torch.int8).cpu().numpy(),
                            tritonrcp_minus_rn=(yi - ri).clamp(-127, 127).to(torch.int8).cpu().numpy())
        log("sweep [1,2): compiled != eager", int((ci != ei).sum()), "triton 1/x != rn", int((yi != ri).sum()),
            "max |d|", int((ci - ei).abs().max()), int((yi - ri).abs().max()))
    except Exception:  # noqa: BLE001
        log("sweep failed:\n" + traceback.format_exc())

    # FP8 casts of non-finite and out-of-range values.
    vals = torch.tensor([np.inf, -np.inf, np.nan, 448.0, 464.0, 480.0, 500.0, 1e30, -1e30, 57344.0, 61440.0,
                         65536.0, 1e38, -0.0], dtype=torch.float32, device=DEV)
    result["cast_input"] = bits(vals)
    for name, dt in (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)):
        try:
            result[f"cast_torch_{name}"] = vals.mul(2.0).to(dt).view(torch.uint8).cpu().numpy()
            log(f"torch x.mul(2).to({name}):", result[f"cast_torch_{name}"].tolist())
        except Exception:  # noqa: BLE001
            log(f"torch cast {name} failed:\n" + traceback.format_exc())
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def satfinite_kernel(x_ptr, y4_ptr, y5_ptr, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = i < n
            v = tl.load(x_ptr + i, mask=m, other=0.0) * 2.0
            z = tl.zeros_like(v)
            c4 = tl.inline_asm_elementwise("cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f", [z, v],
                                           dtype=tl.int16, is_pure=True, pack=1)
            c5 = tl.inline_asm_elementwise("cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;", "=h,f,f", [z, v],
                                           dtype=tl.int16, is_pure=True, pack=1)
            tl.store(y4_ptr + i, c4, mask=m)
            tl.store(y5_ptr + i, c5, mask=m)

        y4 = torch.zeros(vals.numel(), dtype=torch.int16, device=DEV)
        y5 = torch.zeros_like(y4)
        satfinite_kernel[(1,)](vals, y4, y5, vals.numel(), BLOCK=16)
        torch.cuda.synchronize()
        result["cast_satfinite_e4m3"] = (y4.cpu().numpy().view(np.uint16) & 0xFF).astype(np.uint8)
        result["cast_satfinite_e5m2"] = (y5.cpu().numpy().view(np.uint16) & 0xFF).astype(np.uint8)
        log("PTX cvt.rn.satfinite e4m3:", result["cast_satfinite_e4m3"].tolist())
        log("PTX cvt.rn.satfinite e5m2:", result["cast_satfinite_e5m2"].tolist())
    except Exception:  # noqa: BLE001
        log("satfinite probe failed:\n" + traceback.format_exc())

    np.savez_compressed(os.path.join(out_dir, "te_compiled_update.npz"), **result)
    ptx = sorted(glob.glob(os.path.join(os.environ["TRITON_CACHE_DIR"], "**", "*.ptx"), recursive=True))
    for p in ptx:
        with open(p) as f:
            text = f.read()
        if "div" in text or "rcp" in text:
            code_lines.append(f"==== PTX {os.path.basename(p)}\n" + "\n".join(
                line for line in text.splitlines() if any(s in line for s in ("div", "rcp", "mul", "fma", ".entry"))))


def pack(npz_path, data_dir, everything=False):
    """The C++ test's subset: every edge amax and ~1300 random ones (all 87,023 with --pack-all),
    with torch's eager and compiled scales for fp8_max 448 / 57344 and margins 0, 1, 0.5, 2, -1
    (float32 bits, uint32 .npy). The compiled function ran four times per margin, alternating
    fp8_max (Dynamo's recompiles); the runs of one fp8_max must agree, and one of each is kept."""
    d = np.load(npz_path)
    a = d["amax"].view(np.float32)
    n_random = 40000 + 20000 + 20000 + 2000
    keep = np.zeros(a.size, bool)
    keep[n_random:] = True  # powers of two, fp8 max multiples, overflow edges, specials
    rng = np.random.default_rng(7)
    for lo, hi, count in ((0, 40000, 600), (40000, 60000, 300), (60000, 80000, 300), (80000, 82000, 100)):
        keep[rng.choice(np.arange(lo, hi), count, replace=False)] = True
    if everything:
        keep[:] = True
    os.makedirs(data_dir, exist_ok=True)
    np.save(os.path.join(data_dir, "amax.npy"), d["amax"][keep])
    for k in sorted(d.files):
        if k.startswith("eager_"):
            np.save(os.path.join(data_dir, k + ".npy"), d[k][keep])
    for margin in ("m0", "m1", "m0p5", "m2", "mm1"):
        for fp8_max, runs in (("448", ("call0", "call2")), ("57344", ("call1", "fresh"))):
            first, second = (d[f"compiled_{fp8_max}_{margin}_{run}"] for run in runs)
            assert np.array_equal(first, second), (fp8_max, margin)
            np.save(os.path.join(data_dir, f"compiled_{fp8_max}_{margin}.npy"), first[keep])
    print("packed", int(keep.sum()), "amaxes into", data_dir)


if len(sys.argv) == 4 and sys.argv[1] in ("--pack", "--pack-all"):
    pack(sys.argv[2], sys.argv[3], everything=sys.argv[1] == "--pack-all")
    sys.exit(0)

try:
    main()
except Exception:  # noqa: BLE001
    log("FAILED:\n" + traceback.format_exc())
finally:
    with open(os.path.join(out_dir, "log.txt"), "w") as f:
        f.write("\n".join(log_lines) + "\n")
    with open(os.path.join(out_dir, "code.txt"), "w") as f:
        f.write("\n".join(code_lines) + "\n")
