# The recipe studies (python/examples/{gpt,mae}_recipes.py) run end to end for a few steps under
# every recipe they know, write every report file, and repeat their numbers for a seed.
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the studies need PyTorch (Debian: apt install python3-torch)")
pytest.importorskip("matplotlib", reason="the studies' charts need matplotlib (Debian: apt install python3-matplotlib)")

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "python" / "examples"


def run_study(name, out, *args):
    cmd = [sys.executable, str(EXAMPLES / f"{name}.py"), "--out", str(out), "--threads", "1", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


def check_reports(out, stem, throughput, runs):
    for suffix in ("csv", "json", "png"):
        assert (out / f"{stem}.{suffix}").stat().st_size > 0
    report = json.loads((out / f"{stem}.json").read_text())
    assert [r["run"] for r in report["runs"]] == runs
    for r in report["runs"]:
        assert r["final_loss"] == r["final_loss"] and r[throughput] > 0 and r["memory_bytes"] > 0
    assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return report


def test_gpt_recipes_every_run(tmp_path):
    sys.path.insert(0, str(EXAMPLES))
    import gpt_recipes
    run_study("gpt_recipes", tmp_path, "--steps", "2", "--eval-batches", "1")
    report = check_reports(tmp_path, "gpt_recipes", "tokens_per_s", list(gpt_recipes.CATALOG))
    by_name = {r["run"]: r for r in report["runs"]}
    # FP8 moments take a byte (and a scale per 128) where float32 ones take four.
    assert by_name["bf16_adamw_fp8_states"]["optimizer_state_bytes"] < 0.3 * by_name["bf16"]["optimizer_state_bytes"]
    assert all(set(layer) >= {"input", "weight", "grad_output", "nonfinite"} for layer in by_name["nvfp4"]["layer_amax"].values())


def test_mae_recipes_every_run(tmp_path):
    run_study("mae_recipes", tmp_path, "--steps", "2", "--images", "64")
    check_reports(tmp_path, "mae_recipes", "images_per_s", ["bf16", "fp8_current", "mxfp8", "nvfp4"])
    assert (tmp_path / "mae_recon.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_seed_repeats_its_losses_whatever_the_job_count(tmp_path):
    losses = []
    for jobs in ("1", "2"):
        run_study("gpt_recipes", tmp_path / jobs, "--steps", "3", "--recipes", "nvfp4,fp8_delayed", "--eval-batches", "1",
                  "--jobs", jobs)
        report = json.loads((tmp_path / jobs / "gpt_recipes.json").read_text())
        losses.append([(r["final_loss"], r["val_loss"]) for r in report["runs"]])
    assert losses[0] == losses[1]


def test_bad_options_are_refused(tmp_path):
    cmd = [sys.executable, str(EXAMPLES / "gpt_recipes.py"), "--out", str(tmp_path), "--recipes", "fp4_magic"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "unknown run" in done.stderr + done.stdout
