#!/usr/bin/env python3
"""The recipe table of the training guide, measured: reads the studies' JSON reports in a directory
(gpt_recipes.json, mae_recipes.json, hybrid_recipes.json, lora_recipes.json; those present) and
writes recipe_table.md there. One row per recipe and study: training tokens per second on this CPU
and against BF16 in the same study, the memory a GPU would hold against BF16, NaN / Inf values and
loss spikes, and quality against the study's FP8 baseline (perplexity; the MAE's reconstruction
error). Then the guide's fallback advice (go back to FP8 when NVFP4 diverges) as the GPT study's
nvfp4_fallback run measured it.

examples:
  /usr/bin/python3 python/examples/recipe_table.py --reports reports
"""

import argparse
import json
import math
import os

STUDIES = [  # (report, the runs that stand for each recipe, the BF16 run, the FP8 baseline, quality key)
    ("gpt_recipes", {"bf16": "bf16", "fp8_delayed": "fp8_delayed", "fp8_current": "fp8_current", "fp8_block": "fp8_block",
                     "mxfp8": "mxfp8", "nvfp4": "nvfp4"}, "bf16", "fp8_current", "val_ppl"),
    ("mae_recipes", {"bf16": "bf16", "fp8_current": "fp8_current", "mxfp8": "mxfp8", "nvfp4": "nvfp4"}, "bf16",
     "fp8_current", "val_loss"),
    ("hybrid_recipes", {"bf16": "hybrid", "fp8_current": "hybrid_fp8", "mxfp8": "hybrid_mxfp8", "nvfp4": "hybrid_nvfp4"},
     "hybrid", "hybrid_fp8", "val_ppl"),
    ("lora_recipes", {"bf16": "nvfp4_base_bf16", "fp8_current": "nvfp4_base_fp8", "mxfp8": "nvfp4_base_mxfp8",
                      "nvfp4": "nvfp4_base_nvfp4"}, "nvfp4_base_bf16", "nvfp4_base_fp8", "val_ppl"),
]


def load(directory, stem):
    path = os.path.join(directory, f"{stem}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def rel(value, reference):
    if reference is None or not (math.isfinite(value) and math.isfinite(reference)) or reference == 0:
        return "n/a"
    return f"{100.0 * (value / reference - 1):+.1f}%"


def table(directory):
    lines = ["| study | recipe (run) | tokens/s | vs BF16 | GPU memory MiB | vs BF16 | NaN/Inf | spikes | quality | "
             "vs FP8 |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    sources = []
    for stem, recipes, bf16_name, fp8_name, quality in STUDIES:
        report = load(directory, stem)
        if report is None:
            continue
        meta = report["meta"]
        sources.append(f"- {stem}: `{meta['command']}` (commit {meta['commit']}, {meta['machine']}, {meta['isa']}, "
                       f"load average {meta['load_average_at_end']})")
        runs = {r["run"]: r for r in report["runs"]}
        bf16, fp8 = runs.get(bf16_name), runs.get(fp8_name)
        label = "val MSE" if quality == "val_loss" else "val ppl"
        for recipe, name in recipes.items():
            r = runs.get(name)
            if r is None:
                continue
            lines.append(
                f"| {stem.replace('_recipes', '')} | {recipe} ({name}) | {r['tokens_per_s']:.0f} | "
                f"{rel(r['tokens_per_s'], bf16 and bf16['tokens_per_s'])} | {r['gpu_memory']['total'] / 2**20:.2f} | "
                f"{rel(r['gpu_memory']['total'], bf16 and bf16['gpu_memory']['total'])} | {r['nonfinite']} | {r['spikes']} | "
                f"{label} {r[quality]:.4g} | {rel(r[quality], fp8 and fp8[quality])} |")
    return lines, sources


def fallback_lines(directory):
    report = load(directory, "gpt_recipes")
    if report is None:
        return []
    runs = {r["run"]: r for r in report["runs"]}
    fell, plain, fp8 = runs.get("nvfp4_fallback"), runs.get("nvfp4"), runs.get("fp8_current")
    if fell is None:
        return []
    steps = report["meta"]["steps"]
    if fell.get("fallback_step"):
        verdict = (f"the run met a NaN or a loss spike at step {fell['fallback_step']}, went back to its last checkpoint "
                   f"and finished in {fell['fallback']}")
    else:
        verdict = f"NVFP4 met no NaN and no loss spike in {steps} steps, so the run never fell back (it is NVFP4's run)"
    out = [f"Fallback advice (FP8 when NVFP4 diverges), measured by gpt_recipes' nvfp4_fallback: {verdict}; "
           f"its validation perplexity {fell['val_ppl']:.4f}"]
    if plain:
        out[0] += f" (plain NVFP4 {plain['val_ppl']:.4f}"
        out[0] += f", FP8 current scaling {fp8['val_ppl']:.4f})" if fp8 else ")"
    out[0] += "."
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reports", default="reports", help="directory holding the studies' JSON reports (default: %(default)s)")
    args = p.parse_args()
    lines, sources = table(args.reports)
    if not sources:
        raise SystemExit(f"no study report (gpt_recipes.json, mae_recipes.json, ...) in {args.reports}")
    text = "\n".join(lines + [""] + fallback_lines(args.reports) + ["", "Made from:"] + sources) + "\n"
    path = os.path.join(args.reports, "recipe_table.md")
    with open(path, "w") as f:
        f.write(text)
    print(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
