# Python side of issue 39's reader / writer defects: sizes are checked before any pass over an
# input (a 2^41-element broadcast view got an amax pass over every element, over an hour, before
# the 2^40 limit refused it), and the checkpoint calls that loop over tensors answer Ctrl-C
# between tensors instead of after the whole call.
import signal
import time

import numpy as np
import pytest

import nvfp4


def broadcast(value, dtype):
    """2^21 x 2^20 = 2^41 elements, every one `value` (a zero-stride view: no memory behind it)."""
    return np.broadcast_to(np.array(value, dtype=dtype), (1 << 21, 1 << 20))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.uint16])
def test_quantizers_refuse_a_view_above_the_limit_before_reading_it(dtype):
    x = broadcast(np.nan if dtype != np.uint16 else 0x7FC0, dtype)
    calls = [
        lambda: nvfp4.quantize(x),
        lambda: nvfp4.quantize(x, "mxfp8"),
        lambda: nvfp4.quantize_rowwise_and_columnwise(x),
        lambda: nvfp4.amax(x),
        lambda: nvfp4.quantize_fp8_current(x),
        lambda: nvfp4.quantize_fp8_with_scale(x, scale=1.0),
    ]
    for call in calls:
        start = time.monotonic()
        with pytest.raises(nvfp4.Error) as caught:
            call()
        assert caught.value.code == "invalid_argument", str(caught.value)
        assert "max_element_count" in str(caught.value)
        assert time.monotonic() - start < 5.0  # (a pass over 2^41 elements takes hours)


def test_code_decoders_refuse_a_view_above_the_limit_before_copying_it():
    codes = np.broadcast_to(np.uint8(0x11), (1 << 21, 1 << 20))
    for call in (lambda: nvfp4.decode_e2m1(codes, packed=True), lambda: nvfp4.decode_ue4m3(codes), lambda: nvfp4.decode_e8m0(codes)):
        with pytest.raises(nvfp4.Error) as caught:
            call()
        assert caught.value.code == "invalid_argument", str(caught.value)


def test_a_view_at_the_limit_is_not_refused_for_its_size():
    # 1 x 32 real elements through a broadcast of a row: read as any other array.
    row = np.linspace(-1, 1, 32, dtype=np.float32)
    x = np.broadcast_to(row, (4, 32))
    q = nvfp4.quantize(x)
    assert np.array_equal(nvfp4.dequantize(q), nvfp4.dequantize(nvfp4.quantize(np.ascontiguousarray(x))))


def _many_weight_checkpoint(path, count):
    q = nvfp4.quantize(np.linspace(-1, 1, 64 * 256, dtype=np.float32).reshape(64, 256))
    nvfp4.save_checkpoint(str(path), {"layers.%d.w" % i: q for i in range(count)})


def test_checkpoint_calls_answer_a_signal_between_tensors(tmp_path):
    # A handler that raises (as Python's SIGINT handler raises KeyboardInterrupt) used to run only
    # once the whole C++ call had returned; the calls now check for signals between tensors. A
    # periodic timer signals from 5 ms into the call on: an interruptible call stops within a
    # tensor's work, long before its uninterrupted run time. The handler stops the timer before it
    # raises: a second signal must not land in pytest.raises' own exit and escape it.
    path = tmp_path / "many.safetensors"
    _many_weight_checkpoint(path, 1500)
    start = time.monotonic()
    assert len(nvfp4.load_checkpoint(str(path))) == 1500
    full = time.monotonic() - start

    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        raise Interrupted()

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        start = time.monotonic()
        with pytest.raises(Interrupted):
            signal.setitimer(signal.ITIMER_REAL, 0.005, 0.005)
            nvfp4.load_checkpoint(str(path))
        interrupted = time.monotonic() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
    assert interrupted < 0.5 * full, (interrupted, full)
