#!/usr/bin/env python3
"""The FP8 codes an H100 writes for NaN inputs of every sign and payload class, by torch's cast
(`x.to(float8_e4m3fn / float8_e5m2)`) and by the satfinite PTX conversion TE's CUDA casts compile
to (cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32). Backs formats/traits.hpp's satfinite_nan_code.

Needs torch with CUDA and Triton, numpy; no TransformerEngine.
usage: probe_fp8_nan_codes.py OUT_DIR   (on the GPU machine; writes nan_codes.json)
"""
import json
import os
import sys

import numpy as np
import torch
import triton
import triton.language as tl

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)

# Quiet and signalling NaNs, both signs, smallest / largest / scattered payloads.
patterns = []
for sign in (0, 0x80000000):
    for payload in (0x400000, 0x400001, 0x7FFFFF, 0x000001, 0x200000, 0x3FFFFF, 0x555555, 0x2AAAAA):
        patterns.append(sign | 0x7F800000 | payload)
bits = np.array(patterns, dtype=np.uint32)
x = torch.from_numpy(bits.view(np.int32).copy()).cuda().view(torch.float32)


@triton.jit
def satfinite_kernel(x_ptr, y4_ptr, y5_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    v = tl.load(x_ptr + i, mask=m)
    z = tl.zeros_like(v)
    c4 = tl.inline_asm_elementwise("cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f", [z, v],
                                   dtype=tl.int16, is_pure=True, pack=1)
    c5 = tl.inline_asm_elementwise("cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;", "=h,f,f", [z, v],
                                   dtype=tl.int16, is_pure=True, pack=1)
    tl.store(y4_ptr + i, c4, mask=m)
    tl.store(y5_ptr + i, c5, mask=m)


y4 = torch.zeros(x.numel(), dtype=torch.int16, device="cuda")
y5 = torch.zeros_like(y4)
satfinite_kernel[(1,)](x, y4, y5, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
torch.cuda.synchronize()
result = {
    "device": torch.cuda.get_device_name(),
    "torch": torch.__version__,
    "input_bits": [f"0x{b:08x}" for b in bits.tolist()],
    "torch_e4m3": x.to(torch.float8_e4m3fn).view(torch.uint8).cpu().tolist(),
    "torch_e5m2": x.to(torch.float8_e5m2).view(torch.uint8).cpu().tolist(),
    "satfinite_e4m3": (y4.cpu().numpy().view(np.uint16) & 0xFF).tolist(),
    "satfinite_e5m2": (y5.cpu().numpy().view(np.uint16) & 0xFF).tolist(),
}
with open(os.path.join(out_dir, "nan_codes.json"), "w") as f:
    json.dump(result, f, indent=1)
for k in ("torch_e4m3", "torch_e5m2", "satfinite_e4m3", "satfinite_e5m2"):
    print(k, sorted(set(result[k])))
