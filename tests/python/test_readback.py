# Everything the CLI writes, Python reads (issue 30): every checkpoint `nvfp4 pack` and `nvfp4 convert`
# write (ModelOpt file and sharded directory, compressed-tensors, GGUF, torchao; NVFP4 and MXFP4)
# loads with nvfp4.load_checkpoint, dequantize_checkpoint_tensor and describe_checkpoint_tensor,
# with the values of the source; checkpoint_format names what a path holds; another tool's file is
# refused by name. The CLI is the one built beside the module (NVFP4_CLI overrides).
import os
import pathlib
import subprocess

import numpy as np
import pytest

import nvfp4


@pytest.fixture(scope="module")
def cli():
    path = os.environ.get("NVFP4_CLI")
    if not path:
        writer = os.environ.get("NVFP4_REFERENCE_WRITER")
        if not writer:
            pytest.fail("set NVFP4_CLI to the nvfp4 program (ctest sets NVFP4_REFERENCE_WRITER, beside which it is found)")
        path = pathlib.Path(writer).resolve().parent.parent / "tools" / "nvfp4"
    if not pathlib.Path(path).is_file():
        pytest.fail(f"the nvfp4 program is not at {path}: build the target nvfp4_cli, or set NVFP4_CLI")
    return str(path)


def run(cli, *args):
    r = subprocess.run([cli, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def weights():
    rng = np.random.default_rng(30)
    return {"model.layers.0.mlp.up_proj": (rng.normal(size=(64, 128)) * 0.02).astype(np.float32),
            "model.layers.0.mlp.down_proj": (rng.normal(size=(32, 128)) * 0.5).astype(np.float32)}


TARGETS = [  # (output name, --to ..., what checkpoint_format says)
    ("mo.safetensors", ["modelopt"], ("modelopt", False, False)),
    ("mo_sharded", ["modelopt", "--max-shard-size", "5000"], ("modelopt", True, True)),
    ("ct_dir", ["compressed-tensors"], ("compressed-tensors", True, False)),
    ("ct.safetensors", ["compressed-tensors"], ("compressed-tensors", False, False)),
    ("m.gguf", ["gguf"], ("gguf", False, False)),
    ("ao.safetensors", ["torchao"], ("torchao", False, False)),
]


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4"])
@pytest.mark.parametrize("via", ["pack", "convert"])
def test_every_written_checkpoint_loads_with_the_source_values(cli, tmp_path, fmt, via):
    inputs = []
    expected = {}
    for name, x in weights().items():
        np.save(tmp_path / f"{name}.npy", x)
        inputs.append(f"{name}={tmp_path / (name + '.npy')}")
        q = nvfp4.quantize(x, "nvfp4_1x16" if fmt == "nvfp4" else "mxfp4")
        expected[name] = q.dequantize()
        assert nvfp4.sqnr_db(x, expected[name]) > 15
    if via == "convert":
        run(cli, "pack", tmp_path / "src.safetensors", *inputs, "--format", fmt, "--quiet")
    for out, to, (format_name, directory, sharded) in TARGETS:
        if fmt == "mxfp4" and to[0] not in ("modelopt", "gguf"):
            continue  # compressed-tensors and torchao hold NVFP4 only
        path = tmp_path / out
        if via == "pack":
            run(cli, "pack", path, *inputs, "--format", fmt, "--quiet", "--to", *to)
        else:
            run(cli, "convert", tmp_path / "src.safetensors", path, "--quiet", "--to", *to)
        found = nvfp4.checkpoint_format(str(path))
        assert (found["kind"], found["format"], found["directory"], found["sharded"]) == ("checkpoint", format_name, directory, sharded)
        loaded = nvfp4.load_checkpoint(str(path))
        assert set(loaded) == set(expected), out
        for name, want in expected.items():
            assert np.array_equal(loaded[name].dequantize(), want), (out, name)
            assert np.array_equal(nvfp4.dequantize_checkpoint_tensor(str(path), name), want), (out, name)
            info = nvfp4.describe_checkpoint_tensor(str(path), name)
            assert info["format"] == ("nvfp4_1x16" if fmt == "nvfp4" else "mxfp4")
            assert (info["rows"], info["cols"]) == want.shape


def test_mxfp8_packs_load(cli, tmp_path):
    x = weights()["model.layers.0.mlp.down_proj"]
    np.save(tmp_path / "w.npy", x)
    for out in ("mx8.safetensors", "mx8_dir"):
        run(cli, "pack", tmp_path / out, f"w={tmp_path / 'w.npy'}", "--format", "mxfp8", "--quiet")
        loaded = nvfp4.load_checkpoint(str(tmp_path / out))
        assert loaded["w"].format == "mxfp8"
        assert loaded["w"] == nvfp4.quantize(x, "mxfp8")


def test_fp8_packs_load(cli, tmp_path):
    x = weights()["model.layers.0.mlp.down_proj"]
    np.save(tmp_path / "w.npy", x)
    run(cli, "pack", tmp_path / "f8", f"w={tmp_path / 'w.npy'}", "--format", "fp8", "--quiet")
    loaded = nvfp4.load_checkpoint(str(tmp_path / "f8"))
    made = nvfp4.quantize_fp8_current(x, "e4m3")
    assert isinstance(loaded["w"], nvfp4.Fp8Tensor) and loaded["w"].per_tensor
    assert loaded["w"].codes.tobytes() == made.codes.tobytes()
    assert loaded["w"].scale_inv.tobytes() == made.scale_inv.tobytes()
    want = made.dequantize()
    assert np.array_equal(loaded["w"].dequantize(), want)
    assert np.array_equal(nvfp4.dequantize_checkpoint_tensor(str(tmp_path / "f8"), "w"), want)


def test_checkpoint_format_and_refusals(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 16), np.float32))
    assert nvfp4.checkpoint_format(str(tmp_path / "x.npy"))["kind"] == "npy"
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04" + b"z" * 60)
    found = nvfp4.checkpoint_format(str(tmp_path / "model.pt"))
    assert found["kind"] == "unsupported" and "ZIP archive" in found["description"]
    with pytest.raises(nvfp4.Error, match="this is a ZIP archive.*supported:") as e:
        nvfp4.load_checkpoint(str(tmp_path / "model.pt"))
    assert e.value.code == "unsupported"
    with pytest.raises(nvfp4.Error, match="NumPy .npy array, not a checkpoint"):
        nvfp4.load_checkpoint(str(tmp_path / "x.npy"))
    with pytest.raises(nvfp4.Error) as e:
        nvfp4.load_checkpoint(str(tmp_path / "missing.safetensors"))
    assert e.value.code == "io_error"
