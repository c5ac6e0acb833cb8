# The Python examples run (on small shapes), so that they keep working as the module changes.
import importlib.util
import pathlib

import numpy as np

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "python" / "examples"


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ulp_distance_counts_representable_floats_between():
    example = load_example("check_fp8_gemm")
    one = np.float32(1.0)
    after_one = np.nextafter(one, np.float32(2))
    assert example.ulp_distance(np.array([one]), np.array([after_one]))[0] == 1
    # Across zero: -min subnormal, +0, +min subnormal are one step apart each; -0 and +0 are equal.
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    assert example.ulp_distance(np.array([-tiny]), np.array([tiny]))[0] == 2
    assert example.ulp_distance(np.array([np.float32(-0.0)]), np.array([np.float32(0.0)]))[0] == 0


def test_check_fp8_gemm_example(tmp_path, capsys):
    example = load_example("check_fp8_gemm")
    # The demonstration: a float32 kernel is not Hopper's tensor core on most outputs.
    naive_matches = example.demonstration(m=16, n=16, k=256)
    assert naive_matches < 16 * 16
    assert "bit-exact: 256 (100.00%)" in capsys.readouterr().out
    # The file interface: the tensor core's own output matches everywhere; one changed bit is found.
    rng = np.random.default_rng(5)
    a = rng.integers(0, 0x7E, (8, 96), dtype=np.uint8)  # finite E4M3 codes
    b = rng.integers(0, 0x7E, (4, 96), dtype=np.uint8)
    import nvfp4
    d = nvfp4.fp8_gemm(nvfp4.Fp8Tensor.from_bytes("e4m3", a, 0.5), nvfp4.Fp8Tensor.from_bytes("e4m3", b, 0.25))
    assert example.check(a, b, 0.5, 0.25, d) == d.size
    d.view(np.uint32)[3, 2] ^= 1
    assert example.check(a, b, 0.5, 0.25, d) == d.size - 1
    assert "farthest at (3, 2)" in capsys.readouterr().out
