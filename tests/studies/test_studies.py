# The recipe studies (python/examples/{gpt,mae,hybrid,lora}_recipes.py) end to end: a short version of
# each runs every run it knows, writes every report file and prints the values stored in
# reference_values.json (the same numbers on the stored ISA, within a stated tolerance elsewhere:
# reference_values.py says why); a seed repeats its losses whatever the job count; a data-parallel
# run repeats its loss curve; bad options are refused.
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the studies need PyTorch (Debian: apt install python3-torch)")
pytest.importorskip("matplotlib", reason="the studies' charts need matplotlib (Debian: apt install python3-matplotlib)")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_values as ref  # noqa: E402

EXAMPLES = ref.EXAMPLES
sys.path.insert(0, str(EXAMPLES))
PNG = b"\x89PNG\r\n\x1a\n"
FILES = {
    "gpt_recipes": [],
    "mae_recipes": ["mae_recon.png"],
    "hybrid_recipes": [f"hybrid_{n}.png" for n in ("loss", "throughput", "memory", "alloc", "long_context", "gate",
                                                     "stability", "poster")],
    "lora_recipes": ["lora_table.md", "base/config.json", "base/model.safetensors", "base_targets_nvfp4.safetensors",
                     "adapters/nvfp4_base_nvfp4/adapter_model.safetensors"],
}


def run_study(name, out, *args, check=True):
    cmd = [sys.executable, str(EXAMPLES / f"{name}.py"), "--out", str(out), "--threads", "1", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    if check:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done


@pytest.mark.parametrize("name", list(ref.STUDIES))
def test_short_run_writes_every_report_and_reproduces_the_stored_values(name, tmp_path):
    stored = json.loads(ref.STORED.read_text())
    entry = stored["studies"][name]
    assert entry["arguments"] == ref.STUDIES[name], "the short command changed: regenerate (reference_values.py --write)"
    report, _ = ref.run_study(name, tmp_path)
    for suffix in (".csv", ".json", ".png", "_table.md"):
        assert (tmp_path / f"{name}{suffix}").stat().st_size > 0
    for extra in FILES[name]:
        assert (tmp_path / extra).stat().st_size > 0, extra
    for png in tmp_path.rglob("*.png"):
        assert png.read_bytes()[:8] == PNG
    module = __import__(name)
    assert [r["run"] for r in report["runs"]] == list(module.CATALOG)
    for r in report["runs"]:
        assert r["tokens_per_s"] > 0 and r["step_ms"] > 0 and r["peak_rss_bytes"] > 0
        assert r["gpu_memory"]["total"] == sum(v for k, v in r["gpu_memory"].items() if k != "total")
        assert r["nonfinite"] == 0 and r["val_ppl"] > 1
    for key in ("command", "commit", "machine", "isa", "torch"):
        assert report["meta"][key]
    tolerance = ref.tolerance_for(stored, report["meta"])
    problems = ref.compare(entry["values"], ref.values_of(name, report), tolerance)
    assert not problems, "\n".join(problems) + f"\n(stored on {stored['isa']} torch {stored['torch']}; " \
                                                f"this machine {report['meta']['isa']} torch {report['meta']['torch']})"
    if name == "lora_recipes":  # recomputing a layer's forward changes no bit of the training
        by_name = {r["run"]: r for r in report["runs"]}
        plain, again = by_name["nvfp4_base_nvfp4"], by_name["nvfp4_base_nvfp4_recompute"]
        assert [p["train_loss"] for p in plain["curve"]] == [p["train_loss"] for p in again["curve"]]
        assert again["gpu_memory"]["activations"] < plain["gpu_memory"]["activations"]
        assert plain["gpu_memory"]["weights"] < 0.5 * by_name["bf16_lora"]["gpu_memory"]["weights"]


def test_a_seed_repeats_its_losses_whatever_the_job_count(tmp_path):
    losses = []
    for jobs in ("1", "2"):
        run_study("gpt_recipes", tmp_path / jobs, "--steps", "3", "--recipes", "nvfp4,fp8_delayed", "--eval-batches", "1",
                  "--jobs", jobs)
        report = json.loads((tmp_path / jobs / "gpt_recipes.json").read_text())
        losses.append([(r["final_loss"], r["val_loss"]) for r in report["runs"]])
    assert losses[0] == losses[1]


def test_a_data_parallel_run_repeats_its_loss_curve_and_writes_the_smoke_report(tmp_path):
    curves = []
    for attempt in ("a", "b"):
        out = tmp_path / attempt
        run_study("gpt_recipes", out, "--nproc", "2", "--steps", "3", "--recipes", "fp8_delayed", "--eval-batches", "1")
        report = json.loads((out / "gpt_recipes.json").read_text())
        smoke = json.loads((out / "ddp_smoke.json").read_text())
        assert (out / "ddp_smoke.png").read_bytes()[:8] == PNG
        assert smoke["world_size"] == 2 and smoke["avg_step_ms"] > 0 and smoke["tokens_per_s"] > 0
        run = report["runs"][0]
        assert run["ranks_hold_equal_weights"]           # DDP's all-reduce keeps the replicas equal
        assert [k["rank"] for k in run["ranks"]] == [0, 1]
        curves.append([[p["train_loss_rank"] for p in k["curve"]] for k in run["ranks"]])
    assert curves[0] == curves[1]
    assert curves[0][0] != curves[0][1]                  # each rank trains on its own rows


def test_a_bad_option_exits_with_a_message_and_writes_nothing(tmp_path):
    done = run_study("gpt_recipes", tmp_path / "out", "--recipes", "fp4_magic", check=False)
    assert done.returncode != 0 and "unknown run" in done.stderr + done.stdout
    assert not (tmp_path / "out").exists()
