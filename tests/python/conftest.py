# Fixtures of the Python module's tests (run by ctest as `python_module`, or by hand:
#   PYTHONPATH=build/release/python NVFP4_REFERENCE_WRITER=build/release/python/python_reference_writer \
#   NVFP4_DEFAULT_GOLDEN_DIR=build/release/tests/golden_vectors /usr/bin/python3 -m pytest tests/python
import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest


def read_safetensors_raw(path):
    """{name: (dtype, shape, bytes)} and the metadata, parsed here without the module under test."""
    blob = pathlib.Path(path).read_bytes()
    (header_size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_size])
    data = blob[8 + header_size:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], data[begin:end])
    return tensors, header.get("__metadata__", {})


@pytest.fixture(scope="session")
def reference_dir(tmp_path_factory):
    """The C++ API's results for one input, written by tests/python/write_reference.cpp."""
    writer = os.environ.get("NVFP4_REFERENCE_WRITER")
    if not writer:
        pytest.fail("NVFP4_REFERENCE_WRITER is not set (ctest sets it to the python_reference_writer program)")
    out = tmp_path_factory.mktemp("cpp_reference")
    subprocess.run([writer, str(out)], check=True)
    return out


@pytest.fixture(scope="session")
def golden():
    """(directory, manifest) of the peers' golden vectors (tests/golden/, or NVFP4_GOLDEN_DIR)."""
    directory = os.environ.get("NVFP4_GOLDEN_DIR") or os.environ.get("NVFP4_DEFAULT_GOLDEN_DIR")
    if not directory:
        pytest.fail("neither NVFP4_GOLDEN_DIR nor NVFP4_DEFAULT_GOLDEN_DIR is set (ctest sets the latter)")
    directory = pathlib.Path(directory)
    return directory, json.loads((directory / "manifest.json").read_text())


def bf16_bits(values_f32):
    """float32 values that are bf16 values (low 16 bits zero) -> their bf16 bits as uint16."""
    bits = np.ascontiguousarray(values_f32, dtype=np.float32).view(np.uint32)
    assert not np.any(bits & 0xFFFF), "not bf16 values"
    return (bits >> 16).astype(np.uint16)
