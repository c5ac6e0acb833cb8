"""The studies' report files: the CSV of every step, the JSON, the chart of the losses (raw and
smoothed curves, each run's final validation loss against the baseline's), the recipe table in
Markdown, and the data-parallel smoke report. docs/training.md, "What every report holds"."""

import csv
import json
import math
import os

# One colour per recipe in every chart of every report (matplotlib's tab10 order); a run that
# varies a recipe (cooldown, optimizer states, architecture) keeps its recipe's colour and gets its
# own dashes and markers, so no line hides another.
RECIPE_COLOURS = {
    "bf16": "#1f77b4",
    "fp8_delayed": "#ff7f0e",
    "fp8_current": "#2ca02c",
    "fp8_block": "#d62728",
    "mxfp8": "#9467bd",
    "nvfp4": "#8c564b",
}
LINE_STYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def write_reports(out, stem, runs, curve_keys, meta, baseline=None, quality="val_ppl", quality_label="val ppl",
                  difference_format="{:+.4f}"):
    """{stem}.csv (one row per run and step; a value not measured at that step is empty),
    {stem}.json (meta and the runs), {stem}.png (train loss raw and smoothed, validation loss, each
    run's last validation loss against the baseline run's) and {stem}_table.md (the recipe table)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{stem}.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "recipe", "step"] + list(curve_keys))
        for r in runs:
            for point in r["curve"]:
                w.writerow([r["run"], r["recipe"], point["step"]] +
                           ["" if point.get(k) is None else f"{point[k]:.6g}" for k in curve_keys])
    with open(os.path.join(out, f"{stem}.json"), "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1, default=_json_default)
    plot_curves(os.path.join(out, f"{stem}.png"), runs, meta, baseline, difference_format)
    with open(os.path.join(out, f"{stem}_table.md"), "w") as f:
        f.write(recipe_table(runs, meta, baseline, quality, quality_label))


def _json_default(v):
    """numpy scalars and 0-d tensors as Python numbers (NaN / Inf are written as JSON's NaN / Infinity)."""
    if hasattr(v, "item"):
        return v.item()
    raise TypeError(f"not JSON-serialisable: {type(v).__name__}")


def style_of(runs):
    """(colour, dashes, marker, index) per run: colour by recipe, dashes by position among the runs
    of that recipe, a marker of its own, so that a curve lying exactly on another still shows."""
    seen, styles = {}, {}
    for n, r in enumerate(runs):
        i = seen.get(r["recipe"], 0)
        seen[r["recipe"]] = i + 1
        styles[r["run"]] = (RECIPE_COLOURS[r["recipe"]], LINE_STYLES[i % len(LINE_STYLES)], MARKERS[n % len(MARKERS)], n)
    return styles


def centred_mean(values, half):
    """A centred moving average over 2 * half + 1 values whose window shrinks symmetrically at both
    ends, so the smoothed curve starts at the first value and ends at the last (no lag: a trailing
    average of a falling loss ends above it)."""
    out = []
    for i in range(len(values)):
        k = min(half, i, len(values) - 1 - i)
        window = values[i - k:i + k + 1]
        out.append(sum(window) / len(window))
    return out


def smoothing_half_width(n):
    return n // 30


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "legend.fontsize": 9})
    return plt


def draw_train_loss(ax, runs, key="train_loss", label="train loss"):
    """Raw per-step losses (thin, pale) and their centred moving average (solid)."""
    styles = _styles_cached(runs)
    tail = []
    for r in runs:
        colour, dashes, marker, n = styles[r["run"]]
        points = [p for p in r["curve"] if p.get(key) is not None and math.isfinite(p[key])]
        xs, ys = [p["step"] for p in points], [p[key] for p in points]
        half = smoothing_half_width(len(ys))
        ax.plot(xs, ys, color=colour, linewidth=0.6, alpha=0.3)
        every = max(1, len(runs))
        ax.plot(xs, centred_mean(ys, half), color=colour, linestyle=dashes, marker=marker, markersize=4,
                markevery=(n % every, max(1, len(xs) // 8)) if len(xs) > 16 else None, linewidth=1.5, label=r["run"])
        tail += ys[len(ys) // 5:]
    if len(tail) > 4:
        tail.sort()
        low, high = tail[0], tail[int(0.98 * (len(tail) - 1))]
        ax.set_ylim(low - 0.08 * (high - low + 1e-12), high + 0.08 * (high - low + 1e-12))
    window = 2 * smoothing_half_width(max(len(r["curve"]) for r in runs)) + 1
    ax.set_title(f"{label}: per step (pale) and centred mean of {window} steps" if window > 1 else f"{label} per step")
    ax.set_xlabel("step")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)


_STYLE_CACHE = {}


def _styles_cached(runs):
    key = tuple((r["run"], r["recipe"]) for r in runs)
    if key not in _STYLE_CACHE:
        _STYLE_CACHE[key] = style_of(runs)
    return _STYLE_CACHE[key]


def draw_val_loss(ax, runs, key="val_loss", label="validation loss"):
    styles = _styles_cached(runs)
    for r in runs:
        colour, dashes, marker, _ = styles[r["run"]]
        points = [p for p in r["curve"] if p.get(key) is not None]
        ax.plot([p["step"] for p in points], [p[key] for p in points], color=colour, linestyle=dashes, marker=marker,
                markersize=4, linewidth=1.4, label=r["run"])
    ax.set_title(label)
    ax.set_xlabel("step")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)


def draw_differences(ax, runs, baseline, key="val_loss", label="validation loss", fmt="{:+.4f}"):
    """Horizontal bars: each run's final `key` minus the baseline run's, labelled with the value;
    the axis leaves room for the labels whatever the sign and size of the differences."""
    styles = _styles_cached(runs)
    base = next(r for r in runs if r["run"] == baseline)[key]
    deltas = [r[key] - base for r in runs]
    ypos = list(range(len(runs)))[::-1]
    for y, r, d in zip(ypos, runs, deltas):
        colour, dashes, _, _ = styles[r["run"]]
        ax.barh(y, d, color=colour, hatch="" if dashes == "-" else "//", edgecolor="black", linewidth=0.5, height=0.7)
    finite = [d for d in deltas if math.isfinite(d)]
    span = max(1e-9, max(abs(d) for d in finite)) if finite else 1.0
    low, high = min([0.0] + finite), max([0.0] + finite)
    ax.set_xlim(low - 0.45 * span, high + 0.45 * span)
    for y, d in zip(ypos, deltas):
        x = d if math.isfinite(d) else 0.0
        ax.annotate(fmt.format(d) if math.isfinite(d) else "diverged", (x, y), xytext=(4 if x >= 0 else -4, 0),
                    textcoords="offset points", ha="left" if x >= 0 else "right", va="center", fontsize=9)
    ax.set_yticks(ypos)
    ax.set_yticklabels([r["run"] for r in runs])
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"final {label} minus {baseline}'s ({base:.4g}); lower is better")
    ax.set_title(f"final {label} against {baseline}")
    ax.grid(axis="x", alpha=0.3)


def plot_curves(path, runs, meta, baseline=None, difference_format="{:+.4f}"):
    """Train loss (raw and smoothed) and validation loss side by side; below, the runs' final
    validation loss against the baseline's, as tall as the runs need."""
    plt = _pyplot()
    baseline = baseline or runs[0]["run"]
    bar_height = 0.42 * len(runs) + 1.3
    fig = plt.figure(figsize=(13, 4.6 + bar_height), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[4.6, bar_height])
    train_ax, val_ax, bars = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])
    draw_train_loss(train_ax, runs)
    draw_val_loss(val_ax, runs)
    val_ax.legend(fontsize=8, ncol=2 if len(runs) > 6 else 1)
    draw_differences(bars, runs, baseline, fmt=difference_format)
    fig.suptitle(f"{meta['title']}: {meta['steps']} steps, seed {meta['seed']} ({meta['machine']}, {meta['isa']}; "
                 f"commit {meta['commit']})", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _mib(b):
    return f"{b / 2**20:.2f}"


def recipe_table(runs, meta, baseline=None, quality="val_ppl", quality_label="val ppl"):
    """The training guide's table per recipe, measured: speed, the memory the GPU would hold next
    to this process's peak RSS, stability and quality against the FP8 baseline (the first FP8 run;
    else `baseline`)."""
    fp8 = next((r for r in runs if r["recipe"].startswith("fp8")), None)
    ref = fp8 or next((r for r in runs if r["run"] == baseline), runs[0])
    lines = [f"<!-- {meta['command']} | commit {meta['commit']} | {meta['machine']} | {meta['isa']} -->",
             f"| run | recipe | tokens/s | step ms | GPU memory MiB (weights + copies + activations + grads + optimizer) "
             f"| peak RSS MiB | NaN/Inf | spikes | {quality_label} | vs {ref['run']} |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in runs:
        m = r["gpu_memory"]
        parts = " + ".join(_mib(m[k]) for k in ("weights", "weight_copies", "activations", "gradients", "optimizer"))
        q, qref = r.get(quality, float("nan")), ref.get(quality, float("nan"))
        rel = f"{100.0 * (q / qref - 1):+.2f}%" if math.isfinite(q) and math.isfinite(qref) and qref else "n/a"
        lines.append(f"| {r['run']} | {r['recipe']} | {r['tokens_per_s']:.0f} | {r['step_ms']:.1f} | "
                     f"{_mib(m['total'])} ({parts}) | {_mib(r['peak_rss_bytes'])} | {r['nonfinite']} | {r['spikes']} | "
                     f"{q:.5g} | {rel} |")
    return "\n".join(lines) + "\n"


def write_ddp_smoke(out, results, meta):
    """The data-parallel smoke report (the seed playground's ddp_smoke, per rank): ddp_smoke.json
    with the world size, mean step time, tokens per second and final loss of the first run (the
    seed's four numbers) and, per run and rank, every step's loss and time and whether the ranks
    hold the same weights and the same delayed-scaling state; ddp_smoke.png: loss and step time per
    rank."""
    plt = _pyplot()
    first = results[0]
    report = {"world_size": len(first["ranks"]), "avg_step_ms": first["step_ms"], "tokens_per_s": first["tokens_per_s"],
              "loss": first["final_loss"], "command": meta["command"], "commit": meta["commit"],
              "machine": meta["machine"], "isa": meta["isa"], "runs": []}
    for r in results:
        report["runs"].append({
            "run": r["run"], "recipe": r["recipe"], "avg_step_ms": r["step_ms"], "tokens_per_s": r["tokens_per_s"],
            "ranks_hold_equal_weights": r["ranks_hold_equal_weights"],
            "ranks_hold_equal_scaling_state": r["ranks_hold_equal_scaling_state"],
            "ranks": [{"rank": k["rank"], "final_loss": k["final_loss"], "avg_step_ms": k["step_ms"],
                       "peak_rss_bytes": k["peak_rss_bytes"],
                       "loss": [p.get("train_loss_rank", p["train_loss"]) for p in k["curve"] if p.get("train_loss") is not None],
                       "step_ms": [1000.0 * p["step_seconds"] for p in k["curve"] if p.get("step_seconds") is not None]}
                      for k in r["ranks"]]})
    with open(os.path.join(out, "ddp_smoke.json"), "w") as f:
        json.dump(report, f, indent=1, default=_json_default)
    fig, (loss_ax, time_ax) = plt.subplots(1, 2, figsize=(13, 4.8), layout="constrained")
    styles = style_of(results)
    for r, entry in zip(results, report["runs"]):
        colour = styles[r["run"]][0]
        for k in entry["ranks"]:
            dashes = LINE_STYLES[k["rank"] % len(LINE_STYLES)]
            steps = list(range(1, len(k["loss"]) + 1))
            loss_ax.plot(steps, k["loss"], color=colour, linestyle=dashes, linewidth=1.0, label=f"{r['run']} rank {k['rank']}")
            time_ax.plot(steps, k["step_ms"], color=colour, linestyle=dashes, linewidth=0.8,
                         label=f"{r['run']} rank {k['rank']}")
    loss_ax.set_title(f"train loss of each rank's own batch ({report['world_size']} ranks, gloo)")
    loss_ax.set_xlabel("step")
    loss_ax.set_ylabel("loss")
    loss_ax.grid(alpha=0.3)
    loss_ax.legend(fontsize=7, ncol=2)
    time_ax.set_title("step time of each rank (forward, backward, all-reduce, update)")
    time_ax.set_xlabel("step")
    time_ax.set_ylabel("ms")
    time_ax.grid(alpha=0.3)
    fig.suptitle(f"{meta['title']} data-parallel smoke run ({meta['machine']}, {meta['isa']}; commit {meta['commit']})",
                 fontsize=10)
    fig.savefig(os.path.join(out, "ddp_smoke.png"), dpi=110)
    plt.close(fig)
