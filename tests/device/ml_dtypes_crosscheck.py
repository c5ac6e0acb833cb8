"""Cross-check nvfp4's codecs against ml_dtypes over all 2^32 float32 bit patterns.

Builds nothing itself: it loads libnvfp4_codec_shim.so (tests/device/codec_shim.cpp, built by
tests/device/run.sh) through ctypes. Not part of CI; see tests/device/README.md.
"""
import ctypes
import sys

import ml_dtypes
import numpy as np

lib = ctypes.CDLL(sys.argv[1])
CHUNK = 1 << 27
encoders = {
    # name: (ml_dtypes type, shim function, shim policy: 0 saturate, 1 propagate)
    "e4m3 (ml_dtypes cast, no saturation)": (ml_dtypes.float8_e4m3fn, lib.nvfp4_encode_e4m3, 1),
    "e5m2 (ml_dtypes cast, no saturation)": (ml_dtypes.float8_e5m2, lib.nvfp4_encode_e5m2, 1),
    "e2m1 (finite inputs)": (ml_dtypes.float4_e2m1fn, lib.nvfp4_encode_e2m1, 0),
}
total = {name: 0 for name in encoders}
for start in range(0, 1 << 32, CHUNK):
    bits = np.arange(start, start + CHUNK, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    for name, (dtype, fn, policy) in encoders.items():
        ours = np.empty(CHUNK, dtype=np.uint8)
        fn(x.ctypes.data_as(ctypes.c_void_p), ours.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(CHUNK), ctypes.c_int(policy))
        with np.errstate(all="ignore"):
            theirs = x.astype(dtype)
        theirs_bits = theirs.view(np.uint8)
        if dtype is ml_dtypes.float4_e2m1fn:
            keep = np.isfinite(x)  # E2M1 has no NaN/Inf: our tensor APIs reject them
            theirs_bits = theirs_bits & 0xF
        else:
            keep = ~np.isnan(x)  # any NaN code matches any NaN code
            both_nan = np.isnan(theirs.astype(np.float32)) & np.isnan(x)
            keep &= ~both_nan
        bad = np.nonzero(keep & (ours != theirs_bits))[0]
        if bad.size and total[name] == 0:
            i = bad[0]
            print(f"{name}: first mismatch at 0x{int(bits[i]):08x}: ours 0x{int(ours[i]):02x}, ml_dtypes 0x{int(theirs_bits[i]):02x}")
        total[name] += int(bad.size)
print(f"ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}, all 2^32 float32 inputs:")
for name, n in total.items():
    print(f"  {name}: {n} mismatches")
sys.exit(1 if any(total.values()) else 0)
