# Python side of issue 34's bad-input campaign: compare propagates NaN, load_checkpoint refuses JSON
# nested 10^5 deep with a short message (it crashed the interpreter), save_checkpoint refuses a
# name that load_checkpoint could not find again (it wrote ".weight" and loaded back {}).
import math
import struct

import numpy as np
import pytest

import nvfp4


def test_compare_propagates_nan():
    x = np.ones((4, 16), np.float32)
    for approx in (np.full_like(x, np.nan), np.where(np.arange(64).reshape(4, 16) == 5, np.nan, 1.0).astype(np.float32)):
        r = nvfp4.compare(x, approx)
        assert math.isnan(r.max_abs_error)
        assert math.isnan(r.mse)


def test_load_checkpoint_refuses_deep_json_with_a_short_message(tmp_path):
    header = b'{"w":{"dtype":"F32","shape":' + b"[" * 100000 + b"]" * 100000 + b',"data_offsets":[0,0]}}'
    header += b" " * ((8 - len(header) % 8) % 8)
    path = tmp_path / "deep.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(Exception) as caught:
        nvfp4.load_checkpoint(str(path))
    assert len(str(caught.value)) < 1000


def test_save_checkpoint_refuses_an_empty_name(tmp_path):
    q = nvfp4.quantize(np.ones((4, 32), np.float32))
    path = tmp_path / "empty_name.safetensors"
    with pytest.raises(Exception) as caught:
        nvfp4.save_checkpoint(str(path), {"": q})
    assert "non-empty name" in str(caught.value)
    assert not path.exists()
