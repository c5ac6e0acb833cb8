"""The hybrid study's figures (hybrid_recipes.py): one drawing function per panel, each saved as its
own PNG and gathered on a one-page poster. Every figure names the command's machine and commit."""

import math
import os

import study_report as sr

KINDS = [("weights", "master weights"), ("weight_copies", "recipe's weight copies"), ("activations", "saved activations"),
         ("gradients", "gradients"), ("optimizer", "optimizer state")]
KIND_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"]


def draw_throughput(ax, runs):
    styles = sr.style_of(runs)
    ypos = list(range(len(runs)))[::-1]
    values = [r["tokens_per_s"] for r in runs]
    for y, r, v in zip(ypos, runs, values):
        ax.barh(y, v, color=styles[r["run"]][0], edgecolor="black", linewidth=0.5, height=0.7)
        ax.annotate(f"{v:,.0f} tok/s, {r['step_ms']:.0f} ms/step", (v, y), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=9)
    ax.set_xlim(0, 1.6 * max(values))
    ax.set_yticks(ypos)
    ax.set_yticklabels([r["run"] for r in runs])
    ax.set_xlabel("training tokens per second on this CPU (emulation; not a GPU's speed)")
    ax.set_title("training throughput")
    ax.grid(axis="x", alpha=0.3)


def draw_memory(ax, runs):
    """Stacked bars: what a GPU would hold per kind; a black tick: this process's peak RSS."""
    ypos = list(range(len(runs)))[::-1]
    for y, r in zip(ypos, runs):
        left = 0.0
        for (key, label), colour in zip(KINDS, KIND_COLOURS):
            width = r["gpu_memory"][key] / 2**20
            ax.barh(y, width, left=left, color=colour, edgecolor="white", linewidth=0.4, height=0.7,
                    label=label if y == ypos[0] else None)
            left += width
        ax.annotate(f"{left:.2f} MiB", (left, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=9)
    ax.set_yticks(ypos)
    ax.set_yticklabels([r["run"] for r in runs])
    ax.set_xlim(0, 1.25 * max(r["gpu_memory"]["total"] for r in runs) / 2**20)
    ax.set_ylim(-0.6, len(runs) + 0.9)  # room above the bars for the legend
    ax.set_xlabel("MiB a GPU would hold (from the tensors' formats); peak RSS of the CPU process in the JSON")
    ax.set_title("memory by kind")
    ax.legend(fontsize=8, loc="upper center", ncol=len(KINDS), frameon=False)
    ax.grid(axis="x", alpha=0.3)


def draw_allocation(ax, sweep):
    if not sweep:
        ax.text(0.5, 0.5, "allocation sweep not run (--alloc-ratios '')", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    xs = [r["arch"]["rho"] for r in sweep]
    ys = [r["val_loss"] for r in sweep]
    ax.plot(xs, ys, marker="o", color=sr.RECIPE_COLOURS[sweep[0]["recipe"]])
    for i, (r, x, y) in enumerate(zip(sweep, xs, ys)):
        ax.annotate(f"{r['arch']['experts']} experts\n{r['engram_params'] // 1000}k memory", (x, y),
                    xytext=(0, 10 if i % 2 == 0 else -26), textcoords="offset points",
                    ha="left" if i == 0 else ("right" if i == len(sweep) - 1 else "center"), fontsize=8)
    best = min(range(len(ys)), key=lambda i: ys[i])
    ax.scatter([xs[best]], [ys[best]], s=80, facecolors="none", edgecolors="black", zorder=5)
    low, high = min(ys), max(ys)
    ax.set_ylim(low - 0.4 * (high - low + 1e-9), high + 0.4 * (high - low + 1e-9))
    ax.set_xlim(-0.08, 1.08)
    ax.set_xlabel("rho: share of the sparse parameter budget given to experts (the rest: Engram tables)")
    ax.set_ylabel("validation loss")
    ax.set_title(f"sparsity allocation ({sweep[0]['recipe']}, {len(sweep[0]['curve'])} steps per point)")
    ax.grid(alpha=0.3)


def draw_long_context(loss_ax, time_ax, runs):
    styles = sr.style_of(runs)
    for r in runs:
        if not r["long_context"]:
            continue
        colour, dashes, marker, _ = styles[r["run"]]
        seqs = [p["seq"] for p in r["long_context"]]
        loss_ax.plot(seqs, [p["val_loss"] for p in r["long_context"]], color=colour, linestyle=dashes, marker=marker,
                     label=r["run"])
        time_ax.plot(seqs, [p["forward_ms"] for p in r["long_context"]], color=colour, linestyle=dashes, marker=marker,
                     label=r["run"])
    for ax in (loss_ax, time_ax):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("evaluated sequence length (trained at the first)")
        ax.grid(alpha=0.3)
    loss_ax.set_ylabel("validation loss")
    loss_ax.set_title("long context: loss")
    time_ax.set_ylabel("ms per forward of one batch (CPU)")
    time_ax.set_title("long context: forward latency")
    loss_ax.legend(fontsize=8)


def draw_gate(ax, runs, text):
    """Engram's gate at every byte of a validation line: one row per run and block."""
    rows, labels = [], []
    for r in runs:
        for block, trace in enumerate(r.get("gate_trace") or []):
            if trace is not None:
                rows.append(trace)
                labels.append(f"{r['run']} block {block}")
    if not rows:
        ax.text(0.5, 0.5, "no run with Engram memory", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    image = ax.imshow(rows, aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xticks(range(len(text)))
    ax.set_xticklabels([c if c not in "\n " else ("\u21b5" if c == "\n" else "\u2423") for c in text], fontsize=7,
                       family="monospace")
    ax.set_title("Engram gate per byte of a validation line (0: memory ignored, 1: memory added)")
    ax.figure.colorbar(image, ax=ax, fraction=0.025, pad=0.01)


def draw_stability(gain_ax, amax_ax, norm_ax, runs):
    styles = sr.style_of(runs)
    for r in runs:
        colour, dashes, marker, _ = styles[r["run"]]
        steps = [p["step"] for p in r["curve"]]
        half = sr.smoothing_half_width(len(steps))
        gain_ax.plot(steps, [p["composite_gain"] for p in r["curve"]], color=colour, linestyle=dashes, label=r["run"])
        amax_ax.plot(steps, sr.centred_mean([p["amax"] for p in r["curve"]], half), color=colour, linestyle=dashes,
                     label=r["run"])
        norm_ax.plot(steps, [p["grad_norm"] for p in r["curve"]], color=colour, linewidth=0.5, alpha=0.3)
        norm_ax.plot(steps, sr.centred_mean([p["grad_norm"] for p in r["curve"]], half), color=colour, linestyle=dashes,
                     label=r["run"])
    gain_ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    gain_ax.ticklabel_format(axis="y", useOffset=False)
    gain_ax.set_title("composite residual gain (max row / column sum of the mixing product)")
    gain_ax.set_ylabel("gain")
    amax_ax.set_title("largest |input| of any te.Linear per step (centred mean)")
    amax_ax.set_ylabel("amax")
    norm_ax.set_title("gradient norm before clipping (raw pale, centred mean)")
    norm_ax.set_ylabel("norm")
    for ax in (gain_ax, amax_ax, norm_ax):
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    gain_ax.legend(fontsize=8)


def draw_table(ax, runs, baseline):
    base = next((r for r in runs if r["run"] == baseline), runs[0])
    header = ["run", "recipe", "params", "val ppl", f"vs {base['run']}", "tokens/s", "GPU MiB", "RSS MiB", "gain",
              "bigram acc", "NaN", "spikes"]
    cells = []
    for r in runs:
        rel = 100.0 * (r["val_ppl"] / base["val_ppl"] - 1) if math.isfinite(r["val_ppl"]) else float("nan")
        cells.append([r["run"], r["recipe"], f"{r['params'] / 1000:.0f}k", f"{r['val_ppl']:.3f}", f"{rel:+.2f}%",
                      f"{r['tokens_per_s']:.0f}", f"{r['gpu_memory']['total'] / 2**20:.2f}",
                      f"{r['peak_rss_bytes'] / 2**20:.0f}", f"{r['composite_gain']:.3f}",
                      f"{r['bigram_accuracy']:.3f}", str(r["nonfinite"]), str(r["spikes"])])
    ax.set_axis_off()
    table = ax.table(cellText=cells, colLabels=header, loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.scale(1, 1.35)
    ax.set_title("the runs (ppl: per byte; gain 1 = no amplification over depth)")


def _footer(fig, meta):
    fig.text(0.01, 0.003, f"{meta['command']}  |  commit {meta['commit']}  |  {meta['machine']}, {meta['isa']}  |  "
                          f"torch {meta['torch']}", fontsize=7, color="#555555")


def write_all(out, runs, sweep, meta):
    plt = sr._pyplot()
    baseline = "hybrid" if any(r["run"] == "hybrid" for r in runs) else runs[0]["run"]
    height = 0.42 * len(runs) + 1.6

    def single(name, size, draw):
        fig = plt.figure(figsize=size, layout="constrained")
        draw(fig)
        _footer(fig, meta)
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)

    def loss(fig):
        a, b = fig.subplots(1, 2)
        sr.draw_train_loss(a, runs)
        sr.draw_val_loss(b, runs)
        b.legend(fontsize=8)

    single("hybrid_loss.png", (13, 4.8), loss)
    single("hybrid_throughput.png", (9, height), lambda fig: draw_throughput(fig.subplots(), runs))
    single("hybrid_memory.png", (10, height), lambda fig: draw_memory(fig.subplots(), runs))
    single("hybrid_alloc.png", (8, 4.8), lambda fig: draw_allocation(fig.subplots(), sweep))
    single("hybrid_long_context.png", (12, 4.6), lambda fig: draw_long_context(*fig.subplots(1, 2), runs))
    single("hybrid_gate.png", (14, 0.35 * sum(len(r.get("gate_trace") or []) for r in runs) + 2.0),
           lambda fig: draw_gate(fig.subplots(), runs, meta["gate_text"]))
    single("hybrid_stability.png", (16, 4.6), lambda fig: draw_stability(*fig.subplots(1, 3), runs))

    fig = plt.figure(figsize=(18, 25), layout="constrained")
    grid = fig.add_gridspec(6, 6, height_ratios=[4.2, max(3.2, height), 4.0, 3.4, 4.0, 0.5 + 0.32 * len(runs)])
    fig.suptitle(f"Hybrid LM under TE recipes, emulated on a CPU: Engram memory + mHC streams + top-{meta['top_k']} MoE\n"
                 f"{meta['steps']} steps of {meta['tokens_per_step']} bytes (data/shakespeare.txt), width {meta['width']}, "
                 f"depth {meta['depth']}, seed {meta['seed']}", fontsize=15, fontweight="bold")
    sr.draw_train_loss(fig.add_subplot(grid[0, 0:3]), runs)
    val_ax = fig.add_subplot(grid[0, 3:6])
    sr.draw_val_loss(val_ax, runs)
    val_ax.legend(fontsize=8)
    draw_throughput(fig.add_subplot(grid[1, 0:3]), runs)
    draw_memory(fig.add_subplot(grid[1, 3:6]), runs)
    draw_stability(fig.add_subplot(grid[2, 0:2]), fig.add_subplot(grid[2, 2:4]), fig.add_subplot(grid[2, 4:6]), runs)
    draw_gate(fig.add_subplot(grid[3, :]), runs, meta["gate_text"])
    draw_long_context(fig.add_subplot(grid[4, 0:2]), fig.add_subplot(grid[4, 2:4]), runs)
    draw_allocation(fig.add_subplot(grid[4, 4:6]), sweep)
    draw_table(fig.add_subplot(grid[5, :]), runs, baseline)
    _footer(fig, meta)
    fig.savefig(os.path.join(out, "hybrid_poster.png"), dpi=90)
    plt.close(fig)
